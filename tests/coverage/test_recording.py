"""Epoch sinks record their coverage after their durable commit: it may lag, never lead.

A flow writing a Parquet lane with a coverage store is SIGKILLed before the commit,
between the commit and the record (``coverage.before_record``) and right after the
record (``coverage.after_record``): every time, the store claims no offset the lane does
not hold; after a resume both hold every offset. In process: a failed commit records
nothing, and a batch carrying its input span (rows rejected upstream) covers the whole
span, so the rejected offsets are no gap — also through the real ``decode`` operator.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import bytewax.operators as op
import orjson
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

import thalweg_bytewax.operators as twg
from tests.fixtures.crash import CrashHarness
from tests.runtime.jsonl_sink import JsonlPartition, JsonlSink, rows
from thalweg_bytewax.codecs import JsonCodec
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.coverage.input_span import with_input_span
from thalweg_bytewax.coverage.store import DEFAULT_FILE_NAME, SqliteCoverageStore
from thalweg_bytewax.errors import SinkTransientError
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.records.batches import raw_batch_from_records
from thalweg_bytewax.records.model import Locator, RawRecord


def store_spans(store: SqliteCoverageStore, sink: str) -> dict[tuple[str, int], list[list[int]]]:
    if not store.path.exists():
        return {}
    return {(e.topic, e.partition): e.coverage.to_list() for e in store.entries(sink)}


def lane_offsets(lane: Path) -> dict[tuple[str, int], set[int]]:
    table = read_lane(str(lane), ["_twg_source_topic", "_twg_source_partition", "_twg_source_offset"])
    out: dict[tuple[str, int], set[int]] = {}
    if table.num_columns == 0:
        return out
    for t, p, o in zip(*(table.column(i).to_pylist() for i in range(3)), strict=True):
        out.setdefault((t, p), set()).add(o)
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault",
    ["epoch_sink.before_commit:5", "coverage.before_record:5", "coverage.after_record:5"],
)
def test_a_kill_around_the_record_never_lets_coverage_lead_and_resume_catches_up(
    crash: CrashHarness, fault: str
) -> None:
    lane = crash.root / "lane"
    lane.mkdir()
    store_path = lane / DEFAULT_FILE_NAME  # beside the lane's files, hidden from readers
    store = SqliteCoverageStore(store_path)
    argv = [sys.executable, "-m", "tests.coverage.coverage_flow", str(lane), str(store_path)]
    flow = crash.command([*argv, str(crash.init_recovery())])
    flow.killed_at(fault)
    held = lane_offsets(lane)
    claimed = store_spans(store, "coverage.lane")
    for key, spans in claimed.items():
        covered = {o for lo, hi in spans for o in range(lo, hi + 1)}
        assert covered <= held.get(key, set()), f"coverage leads the lane for {key}"
    if fault.startswith("coverage.after_record"):
        assert claimed, "the record before the kill should be in the store"
    flow.finishes()
    full = {("t", p): set(range(40)) for p in range(2)}
    assert lane_offsets(lane) == full
    assert store_spans(store, "coverage.lane") == {("t", p): [[0, 39]] for p in range(2)}


class _RecordingJsonl(JsonlSink):
    def __init__(self, root: Path, store: SqliteCoverageStore) -> None:
        super().__init__(root)
        self.store = store

    def build_part(self, step_id: str, for_part: str, resume_state: dict[str, int] | None) -> JsonlPartition:
        part = super().build_part(step_id, for_part, resume_state)
        part.record_coverage_to(self.store, step_id)
        return part


def test_a_failed_commit_records_nothing(tmp_path: Path) -> None:
    store = SqliteCoverageStore(tmp_path / "c.sqlite3")
    sink = _RecordingJsonl(tmp_path / "out", store)
    part = sink.build_part("flow.out", "0", None)
    part.write_batch([rows("t", 0, [0, 1, 2])])
    sink.fail_commit = True
    with pytest.raises(SinkTransientError):
        part.snapshot()
    assert store_spans(store, "flow.out") == {}


def test_a_busy_store_lags_and_catches_up_without_stopping_the_sink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteCoverageStore(tmp_path / "c.sqlite3")
    store.record("other", {("t", 9): OffsetCoverage([(0, 0)])})  # create the file
    monkeypatch.setattr("thalweg_bytewax.coverage.store._BUSY_TIMEOUT_S", 0.05)
    sink = _RecordingJsonl(tmp_path / "out", store)
    part = sink.build_part("flow.out", "0", None)
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock past the timeout
    part.write_batch([rows("t", 0, [0, 1, 2])])
    assert part.snapshot() == {"t:0": 3}  # the commit stands; recording is retried
    recorder = part.coverage_recorder
    assert recorder is not None
    assert recorder.failures == 1
    holder.execute("ROLLBACK")
    holder.close()
    part.write_batch([rows("t", 0, [3, 4])])
    part.snapshot()
    assert recorder.failures == 0
    assert store_spans(store, "flow.out") == {("t", 0): [[0, 4]]}


def test_a_batch_with_its_input_span_covers_offsets_rejected_upstream(tmp_path: Path) -> None:
    store = SqliteCoverageStore(tmp_path / "c.sqlite3")
    sink = _RecordingJsonl(tmp_path / "out", store)
    part = sink.build_part("flow.out", "0", None)
    # Epoch 1: offsets 0..9 in, 0..4 kept. Epoch 2: 10..19 in, 13 and 15 kept.
    part.write_batch([with_input_span(rows("t", 0, [0, 1, 2, 3, 4]), "t:0", 0, 9)])
    part.snapshot()
    part.write_batch([with_input_span(rows("t", 0, [13, 15]), "t:0", 10, 19)])
    assert part.snapshot() == {"t:0": 20}
    assert store_spans(store, "flow.out") == {("t", 0): [[0, 19]]}


def test_without_the_span_the_rejected_offsets_are_gaps(tmp_path: Path) -> None:
    store = SqliteCoverageStore(tmp_path / "c.sqlite3")
    sink = _RecordingJsonl(tmp_path / "out", store)
    part = sink.build_part("flow.out", "0", None)
    part.write_batch([rows("t", 0, [0, 1, 2, 3, 4])])
    part.snapshot()
    part.write_batch([rows("t", 0, [13, 15])])
    part.snapshot()
    assert store_spans(store, "flow.out") == {("t", 0): [[0, 4], [13, 15]]}


def test_a_span_of_another_partition_claims_nothing(tmp_path: Path) -> None:
    store = SqliteCoverageStore(tmp_path / "c.sqlite3")
    sink = _RecordingJsonl(tmp_path / "out", store)
    part = sink.build_part("flow.out", "0", None)
    part.write_batch([with_input_span(rows("t", 0, [5, 6]), "t:1", 0, 99)])
    part.snapshot()
    assert store_spans(store, "flow.out") == {("t", 0): [[5, 6]]}


def _json_raw(partition: int, values: list[bytes], first: int) -> pa.RecordBatch:
    return raw_batch_from_records(
        [
            RawRecord(Locator("orders", partition, first + i, "c"), b"k", v)
            for i, v in enumerate(values)
        ]
    )


def test_decode_rejects_at_the_edges_leave_no_gap_in_the_table_sink(tmp_path: Path) -> None:
    good = [orjson.dumps({"id": i}) for i in range(3)]
    bad = b"{not json"
    # Epoch-sized batches whose first and last records fail to decode.
    batches = [
        ("orders:0", _json_raw(0, [bad, *good, bad], 0)),
        ("orders:0", _json_raw(0, [bad, *good, bad], 5)),
    ]
    store_path = tmp_path / "store.sqlite3"
    flow = Dataflow("spans")
    raw = op.input("in", flow, TestingSource(batches))
    decoded = twg.decode("decode", raw, JsonCodec(pa.schema([("id", pa.int64())])))
    op.output("orders", decoded.ok, ParquetSink(tmp_path / "orders", shards=1, coverage_store=store_path))
    op.output("dlq", decoded.rejected, ParquetSink(tmp_path / "dlq", shards=1, coverage_store=store_path))
    run_main(flow)
    store = SqliteCoverageStore(store_path)
    assert store_spans(store, "spans.orders") == {("orders", 0): [[0, 9]]}
    assert lane_offsets(tmp_path / "orders") == {("orders", 0): {1, 2, 3, 6, 7, 8}}
    # The DLQ lane covers what it holds.
    dlq = OffsetCoverage.from_list(store_spans(store, "spans.dlq")[("orders", 0)])
    assert all(dlq.covers(o) for o in (0, 4, 5, 9))
