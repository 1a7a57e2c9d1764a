"""The flow every table sink's kill-and-resume test runs: raw lane, decode, the sink.

``python -m bytewax.run "tests.sinks.crash_flow:build_flow('iceberg', ROOT)" -r REC -s 0
-b 0`` (and ``-w 2``, or ``-i 0|1 -a host:port;host:port`` for two processes): the
deterministic sample orders (4 source partitions, small batches, an epoch per
activation) go to a raw Parquet lane under ``ROOT/raw`` as they are read, are decoded
(Confluent-framed Avro, the bundled schemas), rejects go to ``ROOT/dlq``, and the
decoded orders go to the sink under test: a Parquet lane under ``ROOT/lane``, an
Iceberg table ``test.orders`` in ``ROOT/warehouse``, PostgreSQL ``SCHEMA.orders``, an
Arrow IPC directory ``ROOT/ipc``, the Kafka topic ``SCHEMA`` at bootstrap ``DSN`` or the
Flight target ``SCHEMA`` on the server at location ``DSN``.
Two shards each, so with two workers or processes both write. ``THALWEG_FAULT`` kills
it at a named point. The test compares the table with the raw lane by record id.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pyarrow.compute as pc
from bytewax.dataflow import Dataflow
from bytewax.outputs import Sink

import thalweg_bytewax.operators as twg
from thalweg_bytewax.codecs import AvroCodec
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.contracts import Rule
from thalweg_bytewax.dev._orders_sample import SampleOrdersSource
from thalweg_bytewax.registry import DirectorySchemaSource

__all__ = [
    "BATCH",
    "ORDERS",
    "PARTITIONS",
    "SHARDS",
    "SLOTS",
    "build_flow",
    "build_stateful_flow",
    "table_sink",
    "with_slot",
]

ORDERS = 1_200
"""Sample orders per run: 300 per source partition."""
PARTITIONS = 4
BATCH = 100
"""Records per source batch: 3 batches (and epochs) per partition."""
SHARDS = 2
SCHEMAS = Path(__file__).resolve().parents[2] / "thalweg_bytewax" / "flows" / "schemas"
"""The orders flow's bundled writer schemas (its codec without a registry)."""


SLOTS = 25
"""Upsert keys per source partition: ``slot = partition * 100 + offset % SLOTS``."""


def table_sink(
    sink: str,
    root: str,
    dsn: str = "",
    schema: str = "",
    shards: int = SHARDS,
    mode: str = "append",
) -> Sink[Any]:
    """The sink under test, on its target under ``root`` (or in ``schema`` for PostgreSQL).

    Small row groups and data files, so a kill mid-write leaves real partial files.
    ``mode="upsert"`` upserts the tables by ``slot``.
    """
    upsert: dict[str, Any] = {"mode": "upsert", "key_columns": ["slot"]} if mode == "upsert" else {}
    if sink == "parquet":
        return ParquetSink(Path(root) / "lane", shards=shards, row_group_rows=16)
    if sink == "arrow_ipc":
        from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSink

        return ArrowIPCSink(Path(root) / "ipc", shards=shards, max_file_rows=16)
    if sink == "kafka":  # `dsn` is the bootstrap address, `schema` the topic
        from thalweg_bytewax.codecs import JsonEncoder
        from thalweg_bytewax.connectors.kafka import KafkaSink

        return KafkaSink([dsn], schema, encoder=JsonEncoder(), shards=shards)
    if sink == "flight":  # `dsn` is the server's location, `schema` the target
        from thalweg_bytewax.connectors.flight import FlightSink

        return FlightSink(dsn, schema, shards=shards)
    if sink == "iceberg":
        from thalweg_bytewax.connectors.iceberg import IcebergSink

        return IcebergSink(
            str(Path(root) / "warehouse"),
            "test.orders",
            shards=shards,
            target_file_bytes=1,
            **upsert,
        )
    from thalweg_bytewax.connectors.postgres import PostgresSink

    return PostgresSink(dsn, "orders", schema=schema, shards=shards, **upsert)


def with_slot(item: tuple[str, pa.RecordBatch]) -> tuple[str, pa.RecordBatch]:
    """The decoded batch with its upsert key: many rows of a partition share a slot."""
    key, batch = item
    partition = batch.column("_twg_source_partition").cast(pa.int64())
    offset = batch.column("_twg_source_offset")
    slot = pc.add(pc.multiply(partition, 100), pc.remainder(offset, SLOTS))
    return key, batch.append_column("slot", slot)


def build_flow(
    sink: str,
    root: str,
    dsn: str = "",
    schema: str = "",
    shards: int = SHARDS,
    mode: str = "append",
) -> Dataflow:
    """The flow: sample orders → raw lane; decode → DLQ lane and the sink under test.

    ``shards`` is the sink under test's; a run with another count than the last moves
    some source partitions to other shards of it. ``mode="upsert"`` keys the decoded
    rows by ``slot`` and upserts them.
    """
    flow = Dataflow("sink_crash")
    source = SampleOrdersSource(ORDERS, partitions=PARTITIONS, batch_size=BATCH)
    raw = op.input("in", flow, source)
    op.output("raw_lane", raw, ParquetSink(Path(root) / "raw", shards=SHARDS))
    decoded = twg.decode(
        "decode", raw, AvroCodec(DirectorySchemaSource(SCHEMAS)), metadata="locator"
    )
    op.output("dlq", decoded.rejected, ParquetSink(Path(root) / "dlq", shards=SHARDS))
    rows = op.map("slot", decoded.ok, with_slot) if mode == "upsert" else decoded.ok
    op.output("table", rows, table_sink(sink, root, dsn, schema, shards, mode))
    return flow


def build_stateful_flow(sink: str, root: str, dsn: str = "", schema: str = "") -> Dataflow:
    """:func:`build_flow`'s flow with ``twg.dedup`` and a windowed ``twg.validate`` after decode.

    Both keep keyed state per source partition (seen record ids), on the worker that
    reads the partition; the clean rows go to the sink under test.
    """
    flow = Dataflow("sink_crash")
    source = SampleOrdersSource(ORDERS, partitions=PARTITIONS, batch_size=BATCH)
    raw = op.input("in", flow, source)
    op.output("raw_lane", raw, ParquetSink(Path(root) / "raw", shards=SHARDS))
    decoded = twg.decode(
        "decode", raw, AvroCodec(DirectorySchemaSource(SCHEMAS)), metadata="locator"
    )
    op.output("dlq", decoded.rejected, ParquetSink(Path(root) / "dlq", shards=SHARDS))
    window = timedelta(hours=1)
    unique = twg.dedup("dedup", decoded.ok, by="record_id", window=window)
    rule = Rule.unique("_twg_record_id", window=window)
    checked = twg.validate("validate", unique, None, rules=[rule])
    op.output("table", checked.clean, table_sink(sink, root, dsn, schema))
    return flow
