"""A flow for the kill-and-resume test: Kafka -> raw lane, and an unnest SQL node -> its lane.

Run by ``tests/recovery/test_sql_unnest_crash.py`` under ``python -m bytewax.run`` with
``THALWEG_BOOTSTRAP_SERVERS``, ``THALWEG_TOPICS``, ``THALWEG_RAW_LANE``,
``THALWEG_ITEMS_LANE``, ``THALWEG_BATCH_SIZE`` and ``THALWEG_MAX_RECORDS_PER_S``.
"""

from __future__ import annotations

import os

import bytewax.operators as op
from bytewax.dataflow import Dataflow

import thalweg_bytewax.operators as twg
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink

# Each order's JSON value lists 0..3 items: the node derives one row per item.
QUERY = """
SELECT json_extract_string(decode(_twg_source_value), '$.id') AS order_id,
       unnest(json_extract_string(decode(_twg_source_value), '$.items[*]')) AS item
FROM orders
"""


def build_flow() -> Dataflow:
    """The flow, configured by the ``THALWEG_*`` variables of the module docstring."""
    source = KafkaSource(
        os.environ["THALWEG_BOOTSTRAP_SERVERS"],
        [os.environ["THALWEG_TOPICS"]],
        tail=False,
        batch_size=int(os.environ.get("THALWEG_BATCH_SIZE", "100")),
        max_records_per_s=float(os.environ.get("THALWEG_MAX_RECORDS_PER_S", "1000")),
    )
    flow = Dataflow("sql_unnest")
    raw = op.input("kafka", flow, source)
    op.output("raw_lane", raw, ParquetSink(os.environ["THALWEG_RAW_LANE"]))
    items = twg.sql("items", raw, QUERY, name="orders")
    op.output("items_lane", items, ParquetSink(os.environ["THALWEG_ITEMS_LANE"]))
    return flow


if "THALWEG_BOOTSTRAP_SERVERS" in os.environ:  # under `python -m bytewax.run`
    flow = build_flow()
