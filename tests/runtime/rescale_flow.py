"""A flow whose keyed state must survive a resume at another worker count.

``python -m bytewax.run "tests.runtime.rescale_flow:build_flow(ROOT, UPTO)" -r REC -s 0
-b 0`` (``-w N`` or ``-i I -a …``): six source partitions ``rescale:0`` … ``rescale:5``
emit a batch of ten rows per activation until their ``UPTO``-th batch; a resumed
partition first sends its last snapshotted batch again (a replay, as a source that
resumes at a committed offset may). ``twg.dedup`` by record id drops that replay — only
if its state was carried over — and a step keyed by source partition, its state on the
reading worker as dedup's, counts the rows each partition has ever passed and appends
``key total`` lines to ``ROOT/totals-<pid>.log``. At exit each process writes its
crossings to ``ROOT/crossings-<pid>.json``.
"""

from __future__ import annotations

import atexit
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.operators import StatefulLogic
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from typing_extensions import override

import thalweg_bytewax.operators as twg
from thalweg_bytewax.operators._routing import stateful_on_reading_worker
from thalweg_bytewax.runtime import crossings
from thalweg_bytewax.runtime.parts import announce_listing

__all__ = ["build_flow"]

KEYS = [f"rescale:{p}" for p in range(6)]


class _Partition(StatefulSourcePartition[tuple[str, pa.RecordBatch], int]):
    def __init__(self, key: str, upto: int, done: int) -> None:
        self.key, self.upto, self.done = key, upto, done

    @override
    def next_batch(self) -> list[tuple[str, pa.RecordBatch]]:
        if self.done >= self.upto:
            raise StopIteration
        ids = [f"{self.key}/{self.done}/{i}".encode() for i in range(10)]
        self.done += 1
        return [(self.key, pa.record_batch({"n": list(range(10)), "_twg_record_id": ids}))]

    @override
    def snapshot(self) -> int:
        return self.done


class _Source(FixedPartitionedSource[tuple[str, pa.RecordBatch], int]):
    def __init__(self, upto: int) -> None:
        self.upto = upto

    @override
    def list_parts(self) -> list[str]:
        return announce_listing(KEYS)

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> _Partition:
        crossings.note_readers([for_part])
        # Resumed: the last batch the previous run snapshotted is sent again.
        return _Partition(for_part, self.upto, max((resume_state or 0) - 1, 0))


class _Total(StatefulLogic[pa.RecordBatch, int, int]):
    def __init__(self, resumed: int | None) -> None:
        self.total = resumed or 0

    @override
    def on_item(self, value: pa.RecordBatch) -> tuple[list[int], bool]:
        self.total += value.num_rows
        return [self.total], StatefulLogic.RETAIN

    @override
    def snapshot(self) -> int:
        return self.total


class _Lines(StatelessSinkPartition[tuple[str, int]]):
    def __init__(self, path: Path) -> None:
        self.path = path

    @override
    def write_batch(self, items: list[tuple[str, int]]) -> None:
        with self.path.open("a") as out:
            out.writelines(f"{key} {total}\n" for key, total in items)


class _LinesSink(DynamicSink[tuple[str, int]]):
    def __init__(self, root: Path) -> None:
        self.root = root

    @override
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Lines:
        return _Lines(self.root / f"totals-{os.getpid()}.log")


def build_flow(root: str, upto: int) -> Dataflow:
    """The counting flow over six partitions, up to ``upto`` batches each."""

    def write() -> None:
        body = crossings.crossings().as_dict()
        Path(root, f"crossings-{os.getpid()}.json").write_text(json.dumps(body))

    atexit.register(write)
    flow = Dataflow("rescale")
    batches = op.input("in", flow, _Source(upto))
    unique = twg.dedup("dedup", batches, by="record_id", window=timedelta(hours=1))
    totals: Any = stateful_on_reading_worker("total", unique, _Total)
    op.output("out", totals, _LinesSink(Path(root)))
    return flow
