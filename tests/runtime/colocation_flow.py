"""A flow that logs where each source partition is read and where its rows are staged.

``python -m bytewax.run "tests.runtime.colocation_flow:build_flow(ROOT, PARTITIONS, SHARDS)"``
(``-w N``, or ``-i 0|1 -a host:port;host:port``): the sample orders over ``PARTITIONS``
source partitions go to a Parquet lane under ``ROOT/lane`` of ``SHARDS`` shards. Each
source partition built and each batch staged appends a line ``kind key pid thread`` to
``ROOT/where-<pid>.log``, so a test can tell whether any batch was staged on a worker
other than the one that read it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow

from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.dev._orders_sample import SampleOrdersSource
from thalweg_bytewax.runtime.epoch_sink import EpochSinkState

__all__ = ["build_flow"]


def _log(root: Path, kind: str, key: str) -> None:
    line = f"{kind} {key} {os.getpid()} {threading.get_ident()}\n"
    with (root / f"where-{os.getpid()}.log").open("a") as out:
        out.write(line)


class _WhereSource(SampleOrdersSource):
    def __init__(self, root: Path, count: int, partitions: int) -> None:
        super().__init__(count, partitions=partitions, batch_size=50)
        self.root = root

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> Any:
        _log(self.root, "read", for_part)
        return super().build_part(step_id, for_part, resume_state)


class _WhereSink(ParquetSink):
    def __init__(self, root: Path, shards: int) -> None:
        super().__init__(root / "lane", shards=shards)
        self.root = root

    def build_shard(self, step_id: str, shard: int, resume_state: EpochSinkState | None) -> Any:
        part = super().build_shard(step_id, shard, resume_state)
        stage = part.stage

        def logged_stage(key: str, rows: pa.RecordBatch) -> None:
            _log(self.root, "stage", key)
            stage(key, rows)

        part.stage = logged_stage  # type: ignore[method-assign]
        return part


def build_flow(root: str, partitions: int, shards: int) -> Dataflow:
    """Sample orders over ``partitions`` partitions into a lane of ``shards`` shards."""
    flow = Dataflow("colocation")
    where = Path(root)
    batches = op.input("in", flow, _WhereSource(where, 40 * partitions, partitions))
    op.output("lane", batches, _WhereSink(where, shards))
    return flow
