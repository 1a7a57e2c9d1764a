"""A flow whose batches drift mid-stream, for the Parquet lane's kill-and-resume test.

``python -m bytewax.run "tests.connectors.parquet.parquet_drift_flow:build_flow(ROOT)" -r REC -s 0
-b 0``: two source partitions of decoded orders (``tests.sinks.targets.orders``), one
batch and epoch per activation; from offset :data:`CHANGE` on each batch carries a new
column ``coupon`` and ``qty`` as ``int64`` (was ``int32``). They go to a Parquet lane
under ``ROOT/lane`` with ``allow_widening=True``, two shards.
"""

from __future__ import annotations

from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from typing_extensions import override

from tests.sinks.targets import orders
from thalweg_bytewax.connectors.parquet import ParquetSink

__all__ = ["BATCH", "CHANGE", "PARTITIONS", "TOTAL", "build_flow", "drifted"]

PARTITIONS = 2
TOTAL = 60
"""Offsets per source partition."""
BATCH = 10
CHANGE = 30
"""The first offset whose batch carries the new schema."""


def drifted(partition: int, first: int) -> pa.RecordBatch:
    """The batch of ``partition`` starting at ``first`` (the new schema from CHANGE)."""
    offsets = range(first, min(first + BATCH, TOTAL))
    if first < CHANGE:
        return orders(partition, offsets)
    extra = {
        "coupon": pa.array([f"c{o}" for o in offsets]),
        "qty": pa.array([o % 5 + 2**40 for o in offsets], pa.int64()),
    }
    return orders(partition, offsets, extra=extra)


class _Part(StatefulSourcePartition[tuple[str, pa.RecordBatch], int]):
    def __init__(self, partition: int, next_offset: int) -> None:
        self._partition = partition
        self._next = next_offset

    @override
    def next_batch(self) -> list[tuple[str, pa.RecordBatch]]:
        if self._next >= TOTAL:
            raise StopIteration
        batch = drifted(self._partition, self._next)
        self._next += batch.num_rows
        return [(f"orders:{self._partition}", batch)]

    @override
    def snapshot(self) -> int:
        return self._next


class _Drifting(FixedPartitionedSource[tuple[str, pa.RecordBatch], int]):
    @override
    def list_parts(self) -> list[str]:
        return [str(p) for p in range(PARTITIONS)]

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> _Part:
        return _Part(int(for_part), resume_state or 0)


def build_flow(root: str) -> Dataflow:
    """Drifting orders into a Parquet lane that may widen."""
    flow = Dataflow("parquet_drift")
    batches = op.input("in", flow, _Drifting())
    op.output("lane", batches, ParquetSink(Path(root) / "lane", shards=2, allow_widening=True))
    return flow
