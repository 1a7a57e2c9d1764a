"""The flows the Arrow IPC kill-and-resume tests run under ``python -m bytewax.run``.

``build_flow(ROOT)``: deterministic sample orders (4 source partitions, small batches,
an epoch per activation) go to a raw Parquet lane under ``ROOT/raw`` and to an
``ArrowIPCSink`` under ``ROOT/ipc`` (two shards each, so with two workers both write).
``read_flow(ROOT)``: ``ArrowIPCSource`` reads ``ROOT/ipc`` back into a Parquet lane
under ``ROOT/copy``. ``THALWEG_FAULT`` kills either at a named point.
"""

from __future__ import annotations

from pathlib import Path

import bytewax.operators as op
from bytewax.dataflow import Dataflow

from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSink, ArrowIPCSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.dev._orders_sample import SampleOrdersSource

__all__ = ["ORDERS", "build_flow", "read_flow"]

ORDERS = 1_200
"""Sample orders per run: 300 per source partition."""
SHARDS = 2


def build_flow(root: str, fmt: str = "file") -> Dataflow:
    """Sample orders into a raw Parquet lane and an Arrow IPC directory."""
    flow = Dataflow("ipc_crash")
    raw = op.input("in", flow, SampleOrdersSource(ORDERS, partitions=4, batch_size=100))
    op.output("raw_lane", raw, ParquetSink(Path(root) / "raw", shards=SHARDS))
    op.output("ipc", raw, ArrowIPCSink(Path(root) / "ipc", shards=SHARDS, format=fmt))
    return flow


def read_flow(root: str) -> Dataflow:
    """The Arrow IPC directory read back into a Parquet lane."""
    flow = Dataflow("ipc_read_crash")
    batches = op.input("in", flow, ArrowIPCSource(Path(root) / "ipc"))
    op.output("copy", batches, ParquetSink(Path(root) / "copy", shards=SHARDS))
    return flow
