r"""Rows from a stock Bytewax source into Iceberg and PostgreSQL tables, without Kafka.

The source is Bytewax's own ``TestingSource`` of plain dicts (any source works:
``FileSource``, a custom one). ``twg.to_batches`` gathers them into Arrow batches keyed
by device; the rows carry no source locator, so the table sinks are built with
``locators="absent"``: readings are **upserted by** ``reading_id`` (effectively-once: a
replay after a crash overwrites the same keys), and the per-minute averages of
``twg.window_agg`` are upserted by ``(device, window_start)``. Each sink logs its
guarantee once at start. Run it::

    python docs/examples/stock_source_to_tables.py

``THALWEG_WAREHOUSE`` sets the Iceberg warehouse (a local SQL catalog on SQLite, default
``lake/warehouse``); ``THALWEG_POSTGRES_DSN`` a PostgreSQL to write the same tables to
(schema ``iot``). Without it the PostgreSQL half is skipped with a note.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime, timedelta

import bytewax.operators as op
import psycopg
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

import thalweg_bytewax.operators as twg
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig, IcebergSink
from thalweg_bytewax.connectors.postgres import PostgresSink

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SCHEMA = pa.schema(
    [
        pa.field("reading_id", pa.int64(), nullable=False),
        pa.field("device", pa.string(), nullable=False),
        pa.field("at", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("celsius", pa.float64()),
    ]
)
READINGS = [
    {"reading_id": i, "device": f"d{i % 3}", "at": T0 + timedelta(seconds=10 * i),
     "celsius": 20.0 + i % 7}  # fmt: skip
    for i in range(30)
]
READINGS.append(dict(READINGS[4], celsius=99.0))  # a correction: upserted over reading 4


def build(warehouse: str, dsn: str | None) -> Dataflow:
    """The flow: readings and per-minute averages, into Iceberg (and PostgreSQL with a DSN)."""
    flow = Dataflow("stock_source_to_tables")
    rows = op.input("readings", flow, TestingSource(READINGS))
    out = twg.to_batches(
        "batches", rows, schema=SCHEMA, key=lambda r: r["device"], partitions=2, max_rows=100
    )
    minutes = twg.window_agg(
        "per_minute",
        out.batches,
        window=twg.Tumbling(timedelta(minutes=1)),
        aggs={"avg_celsius": ("avg", "celsius"), "readings": ("count", "*")},
        group_by=["device"],
        time_column="at",
    )
    catalog = IcebergCatalogConfig(warehouse=warehouse)
    by_id, by_window = ["reading_id"], ["device", "window_start"]
    op.output("ice_readings", out.batches,
              IcebergSink(catalog, "iot.readings", mode="upsert", key_columns=by_id,
                          locators="absent"))  # fmt: skip
    op.output("ice_minutes", minutes.windows,
              IcebergSink(catalog, "iot.per_minute", mode="upsert", key_columns=by_window,
                          locators="absent"))  # fmt: skip
    if dsn:
        op.output("pg_readings", out.batches,
                  PostgresSink(dsn, "readings", schema="iot", mode="upsert", key_columns=by_id,
                               locators="absent", shards=2))  # fmt: skip
        op.output("pg_minutes", minutes.windows,
                  PostgresSink(dsn, "per_minute", schema="iot", mode="upsert",
                               key_columns=by_window, locators="absent", shards=2))  # fmt: skip
    return flow


def main() -> None:
    """Run the flow, then print what each table holds."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    warehouse = os.environ.get("THALWEG_WAREHOUSE", "lake/warehouse")
    dsn = os.environ.get("THALWEG_POSTGRES_DSN")
    if not dsn:
        print("note: THALWEG_POSTGRES_DSN is not set; skipping the PostgreSQL tables")
    run_main(build(warehouse, dsn))
    catalog = IcebergCatalogConfig(warehouse=warehouse).load()
    readings = catalog.load_table("iot.readings").scan().to_arrow().sort_by("reading_id")
    minutes = catalog.load_table("iot.per_minute").scan().to_arrow()
    print(f"iceberg readings: {readings.num_rows} rows; reading 4 is "
          f"{readings.column('celsius')[4].as_py()}")  # fmt: skip
    print(f"iceberg per_minute: {minutes.num_rows} windows, "
          f"{sum(minutes.column('readings').to_pylist())} readings")  # fmt: skip
    if dsn:
        with psycopg.connect(dsn) as conn:
            n, hot = conn.execute(
                "SELECT count(*), max(celsius) FROM iot.readings"
            ).fetchone() or (0, None)
            w, total = conn.execute(
                "SELECT count(*), sum(readings) FROM iot.per_minute"
            ).fetchone() or (0, None)
        print(f"postgres readings: {n} rows; hottest {hot}")
        print(f"postgres per_minute: {w} windows, {total} readings")


if __name__ == "__main__":
    main()
