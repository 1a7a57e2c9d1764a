"""Admission control: a source partition waits while its flow's bytes are not yet staged."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import cluster_main
from typing_extensions import override

from thalweg_bytewax.connectors.files import FileSource
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS
from thalweg_bytewax.runtime import admission
from thalweg_bytewax.runtime.admission import AdmissionLedger, admission_budget
from thalweg_bytewax.runtime.epoch_sink import EpochSinkPartition, EpochSinkState
from thalweg_bytewax.runtime.sharded_sink import ShardedEpochSink
from thalweg_bytewax.testing import produce

ROOT = Path(__file__).resolve().parents[2]


def test_a_flow_without_an_acknowledging_sink_is_never_held() -> None:
    ledger = AdmissionLedger(100)
    ledger.emitted("f", "t:0", 9, 1_000)
    assert ledger.admit("f", "t:0") is None
    assert ledger.in_flight("f") == 0  # nothing recorded that nothing would release


def test_a_partition_waits_over_the_budget_until_its_bytes_are_staged() -> None:
    ledger = AdmissionLedger(100)
    ledger.expect_acknowledgements("f")
    ledger.emitted("f", "t:0", 9, 60)
    assert ledger.admit("f", "t:0") is None
    ledger.emitted("f", "t:0", 19, 60)
    ledger.emitted("f", "t:1", 4, 10)
    # Over the budget: every partition of the flow waits, and is woken soon.
    assert ledger.admit("f", "t:0") is not None
    assert ledger.admit("f", "t:1") is not None
    assert ledger.admit("g", "t:0") is None  # another flow has its own budget
    ledger.acknowledged("f", "t:0", "f.sink", 12)  # the first batch only
    assert ledger.in_flight("f", "t:0") == 60 and ledger.in_flight("f") == 70
    assert ledger.admit("f", "t:0") is None
    assert ledger.waits == 2


def test_a_batch_is_released_once_every_acknowledging_sink_staged_it() -> None:
    ledger = AdmissionLedger(50)
    ledger.expect_acknowledgements("f")
    ledger.emitted("f", "t:0", 9, 60)
    ledger.emitted("f", "t:0", 19, 60)
    ledger.acknowledged("f", "t:0", "f.table", 5)  # the slow sink is behind
    ledger.acknowledged("f", "t:0", "f.lane", 19)  # the fast one staged both batches
    assert ledger.in_flight("f", "t:0") == 120
    assert ledger.admit("f", "t:0") is not None
    ledger.acknowledged("f", "t:0", "f.table", 19)
    assert ledger.in_flight("f", "t:0") == 0
    assert ledger.admit("f", "t:0") is None


def test_bytes_nothing_acknowledges_stop_counting_after_the_release_time() -> None:
    # A partition whose sink is in another process (or whose rows are all filtered
    # away) must not wait forever: it is released.
    ledger = AdmissionLedger(50, release_after=0.0)
    ledger.expect_acknowledgements("f")
    ledger.emitted("f", "t:0", 9, 60)
    assert ledger.admit("f", "t:0") is None
    assert ledger.releases == 1 and ledger.in_flight("f") == 0
    # Its bytes stop counting (no other partition of the flow waits on them) until a
    # sink of the process acknowledges it again.
    ledger.emitted("f", "t:0", 19, 60)
    assert ledger.in_flight("f") == 0
    ledger.acknowledged("f", "t:0", "f.sink", 19)
    ledger.emitted("f", "t:0", 29, 60)
    assert ledger.in_flight("f") == 60


def test_a_budget_of_zero_turns_admission_off(monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = AdmissionLedger(0)
    ledger.expect_acknowledgements("f")
    ledger.emitted("f", "t:0", 9, 10**9)
    assert ledger.admit("f", "t:0") is None
    monkeypatch.setenv(admission.ADMISSION_BYTES_ENV, "0")
    assert admission_budget() == 0
    monkeypatch.setenv(admission.ADMISSION_BYTES_ENV, "")
    assert admission_budget() == admission.DEFAULT_ADMISSION_BYTES
    monkeypatch.setenv(admission.ADMISSION_BYTES_ENV, "64MB")
    with pytest.raises(ConfigError, match="THALWEG_ADMISSION_BYTES"):
        admission_budget()


class _SlowSink(ShardedEpochSink["_SlowPartition"]):
    """One shard that sleeps per batch and notes the flow's bytes in flight as it stages."""

    def __init__(self) -> None:
        self.shards = 1
        self.seen: list[int] = []
        self.largest = 0
        self.rows = 0

    @override
    def build_shard(
        self, step_id: str, shard: int, resume_state: EpochSinkState | None
    ) -> _SlowPartition:
        return _SlowPartition(self, shard, resume_state)


class _SlowPartition(EpochSinkPartition):
    def __init__(self, sink: _SlowSink, shard: int, resume: EpochSinkState | None) -> None:
        super().__init__(
            component="slow sink",
            columns=DEFAULT_COLUMNS,
            resume_state=resume,
            shard=shard,
            shards=1,
        )
        self.sink = sink

    @override
    def open_partition(self, key: str, topic: str, partition: int) -> OffsetCoverage:
        return OffsetCoverage([])

    @override
    def stage(self, key: str, rows: pa.RecordBatch) -> None:
        self.sink.seen.append(admission.ledger().in_flight("admission_flow"))
        self.sink.rows += rows.num_rows
        self.sink.largest = max(self.sink.largest, rows.nbytes)
        time.sleep(0.01)

    @override
    def commit_epoch(self) -> None:
        return None


def test_a_slow_sink_on_the_other_worker_holds_the_source_to_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    ids = pa.array(range(40_000), pa.int64())
    names = pa.compute.binary_join_element_wise("customer-", ids.cast(pa.string()), "")
    pacsv.write_csv(pa.table([ids, names], schema=schema), tmp_path / "b.csv")
    (tmp_path / "a.csv").write_text("id,name\n", encoding="utf-8")
    budget = 256 * 1024
    ledger = AdmissionLedger(budget)
    monkeypatch.setattr(admission, "_ledger", (os.getpid(), ledger))
    flow = Dataflow("admission_flow")
    # `b.csv` is listed second: read on one worker, staged by the one shard on the other.
    paths = [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]
    source = FileSource(paths, schema=schema, batch_rows=1_000)
    source_batches = op.input("in", flow, source)
    sink = _SlowSink()
    op.output("slow", source_batches, sink)
    cluster_main(flow, [], 0, worker_count_per_proc=2)
    assert sink.rows == 40_000  # nothing lost while held
    assert ledger.waits > 0
    # Never more than the budget plus the one batch that crossed it.
    assert max(sink.seen) <= budget + sink.largest, (max(sink.seen), sink.largest)


def _benchmark() -> object:
    spec = importlib.util.spec_from_file_location(
        "admission_benchmark", ROOT / "benchmarks" / "admission.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_peak_rss_stays_flat_when_the_input_doubles_under_a_slow_sink() -> None:
    # Two workers, the sink's shard on the other worker, ten times slower than the read:
    # without admission the whole file queues in front of the sink.
    bench = _benchmark()
    # At the allocators' defaults (nothing set in the environment).
    report = bench.measure(  # type: ignore[attr-defined]
        300_000, ["admission", "off"], 2, 10.0, str(8 * 1024 * 1024), None
    )
    held, free = report["admission"], report["off"]
    assert held[300_000]["waits"] > 0 and free[300_000]["waits"] == 0
    assert free["growth_mb"] > 20, free  # the queue of 300,000 more rows
    assert held["growth_mb"] < free["growth_mb"] / 2, (held, free)


@pytest.mark.slow
def test_peak_rss_is_flat_when_the_input_doubles_and_files_are_written_where_read() -> None:
    # The benchmark's placed layout at two workers: three CSV files into a sink of 16
    # shards, ten times slower than the read, each file's shard on the worker reading it.
    bench = _benchmark()
    shape = bench.Shape(workers=2, layout="placed", files=3)  # type: ignore[attr-defined]
    report = bench.measure(  # type: ignore[attr-defined]
        600_000, ["admission"], shape, 10.0, None, None
    )
    held = report["admission"]
    # Flat at the allocators' defaults: within 12 % of the peak at 2N (~30 MB). Measured
    # +9 to +27 MB (4-11 %, the files' blocks reaching their 8 MiB size on the way;
    # from 1,200,000 to 2,400,000 rows -2 to +19 MB). It grew +41 to +66 MB (15-23 %)
    # while the readers' blocks were Python bytes: glibc raises its mmap threshold to
    # the size of a freed block and keeps the next ones in its heaps. The blocks are
    # Arrow buffers now, and each reader returns the pool's freed pages before it reads
    # (tests/connectors/files/test_files_held_memory.py).
    assert held["growth_mb"] <= 0.12 * held[1_200_000]["peak_rss_mb"], held


def test_a_kafka_partition_reads_nothing_while_its_flow_is_over_budget(
    kafka_bootstrap: str, make_topic: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x" * 100, "partition": 0} for _ in range(40)])
    ledger = AdmissionLedger(1)  # any batch puts the flow over
    monkeypatch.setattr(admission, "_ledger", (os.getpid(), ledger))
    ledger.expect_acknowledgements("kafka_flow")
    part = KafkaSource([kafka_bootstrap], [topic], batch_size=10).build_part(
        "kafka_flow.in", f"{topic}:0", None
    )
    try:
        first: list[Any] = []
        deadline = time.monotonic() + 20
        while not first and time.monotonic() < deadline:
            first = part.next_batch()
        (key, batch) = first[0]
        last = batch.column(DEFAULT_COLUMNS.source_offset)[-1].as_py()
        assert ledger.in_flight("kafka_flow", key) == batch.nbytes
        # Over the budget: no read, and Bytewax is told when to ask again.
        assert part.next_batch() == []
        assert part.next_awake() is not None
        assert part.snapshot()["next_offset"] == last + 1  # nothing skipped while held
        ledger.acknowledged("kafka_flow", key, "kafka_flow.sink", last)
        after: list[Any] = []
        deadline = time.monotonic() + 20
        while not after and time.monotonic() < deadline:
            after = part.next_batch()
        assert after[0][1].column(DEFAULT_COLUMNS.source_offset)[0].as_py() == last + 1
    finally:
        part.close()
