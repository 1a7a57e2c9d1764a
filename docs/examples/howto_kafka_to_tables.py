r"""A Kafka topic into an Iceberg table (and PostgreSQL), through the raw lane, bounded.

``KafkaSource`` (``tail=False``: it stops at the end offsets it finds at start) feeds the
raw lane and ``twg.decode``; decoded orders go to ``IcebergSink`` and, when
``THALWEG_POSTGRES_DSN`` is set, to ``PostgresSink``; decode failures to a DLQ lane.
Run it against the development broker::

    thalweg dev broker &
    thalweg dev produce --count 500
    THALWEG_BOOTSTRAP_SERVERS=$(cat .thalweg/broker) python docs/examples/howto_kafka_to_tables.py

``THALWEG_TOPICS`` (default ``orders``), ``THALWEG_DATA_DIR`` (default ``lake``): the
raw lane, the DLQ lane and the Iceberg warehouse go under it.
"""

from __future__ import annotations

import json
from pathlib import Path

import bytewax.operators as op
import psycopg
from bytewax.dataflow import Dataflow
from bytewax.testing import run_main
from pydantic import Field

import thalweg_bytewax.operators as twg
from thalweg_bytewax.codecs import AvroCodec
from thalweg_bytewax.config import Settings
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig, IcebergSink
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.postgres import PostgresSink
from thalweg_bytewax.dev.samples import ORDER_AVRO_SCHEMA
from thalweg_bytewax.lanes import read_lane


class ExampleSettings(Settings):
    """Read from THALWEG_BOOTSTRAP_SERVERS, _TOPICS, _DATA_DIR and _POSTGRES_DSN."""

    component = "docs.examples.howto_kafka_to_tables"

    bootstrap_servers: str = "localhost:9092"
    topics: list[str] = Field(default=["orders"], min_length=1)
    data_dir: str = "lake"
    postgres_dsn: str | None = None


def schema_dir(data: Path) -> Path:
    """A directory registry: ``1.avsc`` is the schema `thalweg dev produce` frames with id 1.

    With a schema registry, pass its URL to ``AvroCodec`` instead.
    """
    schemas = data / "schemas"
    schemas.mkdir(parents=True, exist_ok=True)
    (schemas / "1.avsc").write_text(json.dumps(ORDER_AVRO_SCHEMA))
    return schemas


def build_flow(settings: ExampleSettings) -> Dataflow:
    """Kafka -> raw lane; Kafka -> decode -> Iceberg (+ PostgreSQL); decode failures -> DLQ."""
    data = Path(settings.data_dir)
    flow = Dataflow("kafka_to_tables")
    source = KafkaSource(
        settings.bootstrap_servers, settings.topics, tail=False, starting_offset="earliest"
    )
    raw = op.input("kafka", flow, source)
    op.output("raw_lane", raw, ParquetSink(data / "raw"))  # every record, envelope intact

    decoded = twg.decode("decode", raw, AvroCodec(schema_dir(data)))
    op.output("dlq", decoded.rejected, ParquetSink(data / "dlq"))

    catalog = IcebergCatalogConfig(warehouse=str(data / "warehouse"))
    op.output("iceberg", decoded.ok, IcebergSink(catalog, "sales.orders"))
    if settings.postgres_dsn:
        op.output("postgres", decoded.ok, PostgresSink(settings.postgres_dsn, "orders",
                                                       schema="sales"))  # fmt: skip
    return flow


def main() -> None:
    """Run the bounded flow to its end, then count what each target holds."""
    settings = ExampleSettings.load()
    run_main(build_flow(settings))
    data = Path(settings.data_dir)
    print("raw lane:", read_lane(data / "raw").num_rows, "records")
    print("dlq lane:", read_lane(data / "dlq").num_rows, "records")
    catalog = IcebergCatalogConfig(warehouse=str(data / "warehouse")).load()
    print(
        "iceberg sales.orders:",
        catalog.load_table("sales.orders").scan().to_arrow().num_rows,
        "rows",
    )
    if settings.postgres_dsn:
        with psycopg.connect(settings.postgres_dsn) as conn:
            row = conn.execute("SELECT count(*) FROM sales.orders").fetchone()
        print("postgres sales.orders:", row[0] if row else 0, "rows")


if __name__ == "__main__":
    main()
