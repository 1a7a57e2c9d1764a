"""ParquetSink bounds what a worker buffers across topic-partitions: ``buffer_bytes``.

Rows wait per topic-partition until a row group fills (``row_group_bytes``), so a worker
reading many partitions would hold one unfilled row group each until the epoch's
snapshot. Beyond ``buffer_bytes`` for all of a sink's partitions on a worker, the
largest buffer is written early as a smaller row group; every row still lands once.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.fixtures.flows import EntryPoint
from tests.helpers import raw_batch, run_into
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.lanes import read_lane

PARTITIONS = 8
BATCHES = 6
ROWS = 200


def _write_all(sink: ParquetSink, shards: int) -> int:
    """Stage BATCHES batches of each partition, round robin; the peak buffered bytes."""
    parts = [sink.build_part("flow.lane", f"shard-{s:03d}", None) for s in range(shards)]
    peak = 0
    for b in range(BATCHES):
        for p in range(PARTITIONS):
            key = f"budget:{p}"
            batch = raw_batch("budget", p, range(b * ROWS, (b + 1) * ROWS), "x" * 64)
            parts[sink.part_fn(key)].write_batch([batch])
            peak = max(peak, sum(part.buffered_bytes for part in parts))
    for part in parts:
        part.snapshot()
    return peak


@pytest.mark.parametrize("shards", [1, 3])
def test_the_sinks_buffers_on_a_worker_stay_within_buffer_bytes(
    tmp_path: Path, shards: int
) -> None:
    one_batch = raw_batch("budget", 0, range(ROWS), "x" * 64).nbytes
    budget = 5 * one_batch
    sink = ParquetSink(tmp_path, shards=shards, buffer_bytes=budget)
    peak = _write_all(sink, shards)
    assert peak <= budget
    lane = read_lane(tmp_path)
    assert lane.num_rows == PARTITIONS * BATCHES * ROWS  # every row once
    assert len(set(lane.column("_twg_record_id").to_pylist())) == lane.num_rows
    groups = sum(pq.ParquetFile(f).num_row_groups for f in tmp_path.rglob("*.parquet"))
    assert groups > PARTITIONS  # row groups were written before the snapshot


def test_under_the_budget_each_partition_fills_one_row_group(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path, shards=1)  # 16 MiB: these ~0.5 MB stay buffered
    peak = _write_all(sink, 1)
    one_batch = raw_batch("budget", 0, range(ROWS), "x" * 64).nbytes
    assert peak >= PARTITIONS * BATCHES * one_batch * 0.99
    groups = [pq.ParquetFile(f).num_row_groups for f in tmp_path.rglob("*.parquet")]
    assert groups == [1] * PARTITIONS


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "64MiB"])
def test_a_buffer_bytes_that_is_not_a_positive_int_is_refused_by_name(
    tmp_path: Path, value: object
) -> None:
    with pytest.raises(ConfigError, match="buffer_bytes"):
        ParquetSink(tmp_path, buffer_bytes=value)  # type: ignore[arg-type]


def test_the_budget_holds_in_a_flow_on_every_entry_point(
    tmp_path: Path, entry_point: EntryPoint, entry_point_name: str
) -> None:
    # A cluster's worker (cluster_main, -i/-a) gets an empty threading.local at every
    # batch: the partitions of a worker must still find each other there, or each
    # would buffer a whole row group and the budget would never be applied.
    one_batch = raw_batch("budget", 0, range(ROWS), "x" * 64).nbytes
    items = [
        (f"budget:{p}", raw_batch("budget", p, range(b * ROWS, (b + 1) * ROWS), "x" * 64))
        for b in range(BATCHES)
        for p in range(PARTITIONS)
    ]
    run_into(
        items, ParquetSink(tmp_path, shards=1, buffer_bytes=5 * one_batch), entry_point=entry_point
    )
    lane = read_lane(tmp_path)
    assert lane.num_rows == PARTITIONS * BATCHES * ROWS  # every row once
    assert len(set(lane.column("_twg_record_id").to_pylist())) == lane.num_rows
    groups = sum(pq.ParquetFile(f).num_row_groups for f in tmp_path.rglob("*.parquet"))
    assert groups > PARTITIONS, entry_point_name  # row groups were written early
