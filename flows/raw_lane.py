r"""The raw lane on its own: Kafka topics into a durable, exactly-once Parquet lane.

Configured by environment, so it runs unchanged under ``python -m bytewax.run``::

    THALWEG_BROKERS=localhost:9092 THALWEG_TOPICS=orders THALWEG_LANE=lake/raw \\
        python -m bytewax.run flows.raw_lane

| variable | meaning | default |
|---|---|---|
| ``THALWEG_BROKERS`` | bootstrap servers | required |
| ``THALWEG_TOPICS`` | comma-separated topics | required |
| ``THALWEG_LANE`` | lane directory or URI | ``thalweg-data/raw`` |
| ``THALWEG_TAIL`` | ``1`` to follow new records, ``0`` to stop at the end | ``1`` |
| ``THALWEG_BATCH_SIZE`` | records per poll | ``10000`` |
| ``THALWEG_MAX_RECORDS_PER_S`` | per-partition rate limit | unlimited |

Importing this module reads the environment but does not touch the network; the
source connects when the dataflow runs.
"""

from __future__ import annotations

import os

import bytewax.operators as op
from bytewax.dataflow import Dataflow

from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import ConfigError

__all__ = ["build_flow", "flow"]


def build_flow() -> Dataflow:
    """Build the raw-lane dataflow from ``THALWEG_*`` environment variables."""
    brokers = os.environ.get("THALWEG_BROKERS", "")
    topics = os.environ.get("THALWEG_TOPICS", "")
    if not brokers or not topics:
        msg = "flows.raw_lane: set THALWEG_BROKERS and THALWEG_TOPICS (e.g. localhost:9092, orders)"
        raise ConfigError(msg)
    rate = os.environ.get("THALWEG_MAX_RECORDS_PER_S")
    source = KafkaSource(
        brokers,
        topics,
        tail=os.environ.get("THALWEG_TAIL", "1") != "0",
        batch_size=int(os.environ.get("THALWEG_BATCH_SIZE", "10000")),
        max_records_per_s=float(rate) if rate else None,
    )
    flow = Dataflow("raw_lane")
    raw = op.input("kafka", flow, source)
    op.output("raw_lane", raw, ParquetSink(os.environ.get("THALWEG_LANE", "thalweg-data/raw")))
    return flow


flow = build_flow()
