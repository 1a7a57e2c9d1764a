r"""The raw lane on its own: Kafka topics into a durable, exactly-once Parquet lane.

Configured by environment, so it runs unchanged under ``python -m bytewax.run``::

    THALWEG_BOOTSTRAP_SERVERS=localhost:9092 THALWEG_TOPICS=orders \\
        python -m bytewax.run flows.raw_lane

| variable | meaning | default |
|---|---|---|
| ``THALWEG_BOOTSTRAP_SERVERS`` | Kafka brokers | required |
| ``THALWEG_TOPICS`` | comma-separated topics | required |
| ``THALWEG_RAW_LANE`` | lane directory or URI | ``thalweg-data/raw`` |
| ``THALWEG_TAIL`` | ``1`` to follow new records, ``0`` to stop at the end | ``1`` |
| ``THALWEG_BATCH_SIZE`` | records per poll | ``10000`` |
| ``THALWEG_MAX_RECORDS_PER_S`` | per-partition rate limit | unlimited |

A missing or bad value raises ``ConfigError`` naming the variable. Importing this module
reads the environment and builds the dataflow; it starts nothing and touches no
network: the source connects when the dataflow runs.
"""

from __future__ import annotations

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from pydantic import Field

from thalweg_bytewax.config import Settings
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink

__all__ = ["RawLaneSettings", "build_flow", "flow"]


class RawLaneSettings(Settings):
    """Settings of the raw-lane flow, read from ``THALWEG_*`` variables by :meth:`load`."""

    component = "flows.raw_lane"

    bootstrap_servers: str = Field(min_length=1)
    topics: list[str] = Field(min_length=1)
    raw_lane: str = "thalweg-data/raw"
    tail: bool = True
    batch_size: int = Field(default=10_000, ge=1)
    max_records_per_s: float | None = Field(default=None, gt=0)


def build_flow(settings: RawLaneSettings) -> Dataflow:
    """Build the raw-lane dataflow: Kafka topics into one Parquet lane.

    Args:
        settings: Flow settings (see :meth:`RawLaneSettings.load`).

    Returns:
        The dataflow, ready for ``python -m bytewax.run`` or ``bytewax.testing.run_main``.
    """
    source = KafkaSource(
        settings.bootstrap_servers,
        settings.topics,
        tail=settings.tail,
        batch_size=settings.batch_size,
        max_records_per_s=settings.max_records_per_s,
    )
    flow = Dataflow("raw_lane")
    raw = op.input("kafka", flow, source)
    op.output("raw_lane", raw, ParquetSink(settings.raw_lane))
    return flow


flow = build_flow(RawLaneSettings.load())
