"""SIGKILL every table sink's flow at each named fault point, resume: every record once.

``tests/sinks/crash_flow.py`` (sample orders → raw Parquet lane; decode → DLQ lane and
the sink under test, two shards each) runs under ``python -m bytewax.run`` with a
recovery directory and an epoch per activation. One test per sink and worker count
kills it in turn at ``epoch_sink.before_commit`` (rows staged, commit not started),
``epoch_sink.mid_write`` (right after rows were staged, the epoch still open),
``epoch_sink.after_commit`` (committed, the epoch's snapshot not yet in the recovery
store) and the sink's own points where it has them, resuming each time, then lets it
finish. After every kill the table holds no record twice; at the end it holds exactly
the raw lane's records minus the decode rejects, by record id. The points fire in
whichever epoch sink of the process reaches them first (raw lane, DLQ or table), as a
crash would. Two OS processes (``-i 0|1 -a``) are killed and resumed the same way for
Iceberg and PostgreSQL, and both are killed after their commit in upsert mode too: each
key ends with its last row, and no replayed row is taken for a missing one.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fixtures.crash import CrashableFlow, CrashHarness
from tests.sinks.crash_flow import ORDERS, PARTITIONS, SHARDS, SLOTS
from tests.sinks.targets import C, SinkTarget
from thalweg_bytewax.lanes import read_lane

pytestmark = pytest.mark.slow

KILLS = ["epoch_sink.before_commit:2", "epoch_sink.mid_write:2", "epoch_sink.after_commit:1"]
"""The named points every sink's flow is killed at, in turn (``point:nth`` of a run)."""
OWN_KILLS = {
    # mid_encode: on the write-behind thread, a row group written, the file's footer not.
    "iceberg": ["iceberg.mid_encode:2", "iceberg.after_commit:1"],
    "postgres": ["postgres.before_commit:1"],
}
"""A sink's own points inside its writes and commit, where it has them."""


def flow_spec(
    target: SinkTarget,
    root: Path,
    shards: int = SHARDS,
    mode: str = "append",
    *,
    stateful: bool = False,
) -> str:
    dsn = getattr(target, "dsn", getattr(target, "bootstrap", getattr(target, "location", "")))
    schema = getattr(target, "schema", getattr(target, "topic", getattr(target, "table", "")))
    if stateful:  # dedup and windowed validation before the sink
        args = f"{target.name!r}, {str(root)!r}, {dsn!r}, {schema!r}"
        return f"tests.sinks.crash_flow:build_stateful_flow({args})"
    args = f"{target.name!r}, {str(root)!r}, {dsn!r}, {schema!r}, {shards}, {mode!r}"
    return f"tests.sinks.crash_flow:build_flow({args})"


def crash_flow(
    crash: CrashHarness,
    target: SinkTarget,
    *extra: str,
    shards: int = SHARDS,
    mode: str = "append",
    stateful: bool = False,
) -> CrashableFlow:
    """The sink's crash flow on the test's recovery store, an epoch per activation."""
    return crash.flow(flow_spec(target, crash.root, shards, mode, stateful=stateful), *extra)


def expected_ids(root: Path) -> list[bytes]:
    """The raw lane's record ids minus the decode rejects' (each raw record once)."""
    raw = read_lane(root / "raw", [C.record_id]).column(0).to_pylist()
    assert len(raw) == ORDERS and len(set(raw)) == ORDERS, "the raw lane lost or doubled records"
    rejected = set(read_lane(root / "dlq", [C.record_id]).column(0).to_pylist())
    assert 0 < len(rejected) < 10  # noqa: PLR2004 - the sample's few undecodable orders
    return sorted(set(raw) - rejected)


def assert_no_record_twice(target: SinkTarget) -> int:
    held = target.record_ids()
    assert len(held) == len(set(held)), f"{len(held) - len(set(held))} records landed twice"
    return len(held)


@pytest.mark.parametrize("workers", [1, 2])
def test_killed_at_each_fault_point_and_resumed_holds_every_record_once(
    table_sink: SinkTarget, crash: CrashHarness, workers: int
) -> None:
    kills = [*KILLS, *OWN_KILLS.get(table_sink.name, [])]
    flow = crash_flow(crash, table_sink, "-w", str(workers))
    for fault in kills:
        flow.killed_at(fault)
        assert_no_record_twice(table_sink)
    flow.finishes()
    assert assert_no_record_twice(table_sink) > 0
    assert table_sink.record_ids() == expected_ids(crash.root)


def test_partitions_moving_to_other_shards_between_killed_runs_land_once(
    table_sink: SinkTarget, crash: CrashHarness
) -> None:
    # Each run changes the worker count, so source partitions move to shards that have
    # no resume state for them (a partition goes to the shard of the worker reading
    # it): the new owner must learn what the target holds.
    runs = [(1, "epoch_sink.after_commit:7"), (2, "epoch_sink.after_commit:4"), (3, None)]
    for workers, fault in runs:
        crash_flow(crash, table_sink, "-w", str(workers), shards=4).ends(fault)
        assert_no_record_twice(table_sink)
    assert table_sink.record_ids() == expected_ids(crash.root)


def last_per_slot(root: Path) -> list[bytes]:
    """Per upsert slot, the record id of its last decoded record (the raw lane's order)."""
    raw = read_lane(root / "raw", [C.record_id, C.source_partition, C.source_offset])
    rejected = set(read_lane(root / "dlq", [C.record_id]).column(0).to_pylist())
    last: dict[int, tuple[int, bytes]] = {}
    for rid, partition, offset in zip(*(raw.column(i).to_pylist() for i in range(3)), strict=True):
        if rid in rejected:
            continue
        slot = partition * 100 + offset % SLOTS
        if slot not in last or offset > last[slot][0]:
            last[slot] = (offset, rid)
    return sorted(rid for _, rid in last.values())


@pytest.mark.parametrize("table_sink", ["iceberg", "postgres"], indirect=True)
def test_an_upsert_table_killed_after_its_commit_resumes_to_the_last_row_of_each_key(
    table_sink: SinkTarget, crash: CrashHarness
) -> None:
    # Each source batch holds four rows of every slot: within an epoch three of them are
    # replaced, so after a kill between the table's commit and the recovery store's the
    # replay meets rows the table no longer holds at their offsets. Their keys are looked
    # up (the table holds each from a later offset): replays, skipped without a doubt.
    flow = crash_flow(crash, table_sink, shards=1, mode="upsert")  # one writer per upsert table
    # The second kill comes two commits into the resumed run, which commits fewer than
    # seven times.
    for fault in ("epoch_sink.after_commit:4", "epoch_sink.after_commit:2"):
        crashed = flow.killed_at(fault)
    done = flow.finishes()
    assert "arrived after a resume" not in done.stderr + crashed.stderr
    assert table_sink.record_ids() == last_per_slot(crash.root)


def start_cluster(
    crash: CrashHarness,
    target: SinkTarget,
    fault: str | None,
    *,
    stateful: bool = False,
    n: int = 2,
) -> list[subprocess.Popen[str]]:
    """``n`` processes of the flow (``-i I -a ...``), process 1 alone armed at ``fault``:
    it dies at the point; the others lose their peer."""
    spec = flow_spec(target, crash.root, stateful=stateful)
    return [p.start(fault if i == 1 else None) for i, p in enumerate(crash.processes(spec, n))]


def kill_run(crash: CrashHarness, procs: list[subprocess.Popen[str]]) -> None:
    """Wait for the armed process (index 1) to die at its point, then end its peers."""
    crash.killed(procs[1], *procs[:1], *procs[2:])


@pytest.mark.parametrize("table_sink", ["iceberg", "postgres"], indirect=True)
def test_two_processes_killed_mid_stream_and_resumed_hold_every_record_once(
    table_sink: SinkTarget, crash: CrashHarness
) -> None:
    kill_run(crash, start_cluster(crash, table_sink, "epoch_sink.after_commit:2"))
    held = assert_no_record_twice(table_sink)
    crash.finish(*start_cluster(crash, table_sink, None))
    assert assert_no_record_twice(table_sink) > held
    assert table_sink.record_ids() == expected_ids(crash.root)


@pytest.mark.parametrize("table_sink", ["iceberg"], indirect=True)
def test_dedup_and_validation_killed_at_two_processes_then_at_four_resume_at_one_once(
    table_sink: SinkTarget, crash: CrashHarness
) -> None:
    # dedup and validate keep their state on the worker reading each partition, under
    # keys that do not depend on the worker count: killed at two processes, resumed at
    # four and killed again, then resumed at one, every record lands once.
    kill_run(crash, start_cluster(crash, table_sink, "epoch_sink.after_commit:2", stateful=True))
    held = assert_no_record_twice(table_sink)
    four = start_cluster(crash, table_sink, "epoch_sink.after_commit:2", stateful=True, n=4)
    kill_run(crash, four)
    assert assert_no_record_twice(table_sink) >= held
    crash_flow(crash, table_sink, stateful=True).finishes()
    assert assert_no_record_twice(table_sink) > held
    assert table_sink.record_ids() == expected_ids(crash.root)


@pytest.mark.parametrize("table_sink", ["iceberg"], indirect=True)
def test_an_iceberg_commit_expiring_the_history_killed_after_it_resumes_once(
    table_sink: SinkTarget, crash: CrashHarness
) -> None:
    # Another writer pads the table with empty snapshots past the sink's bound (100
    # kept, expiry due at 112), so the resumed run's first commit also expires every
    # snapshot the sink had made. It is killed right before that commit, then right
    # after it, resumes and finishes; then the flow runs again without its recovery state (the source replays
    # every record), so only the coverage the kept snapshots hold keeps anything from
    # landing twice.
    from thalweg_bytewax.connectors.iceberg import COVERAGE_PREFIX

    flow = crash_flow(crash, table_sink)
    flow.killed_at("iceberg.after_commit:2")
    held = assert_no_record_twice(table_sink)
    table = table_sink.config.load().load_table(table_sink.table)  # type: ignore[attr-defined]
    made = {s.snapshot_id for s in table.snapshots()}
    for pad in range(120):
        with (
            table.transaction() as tx,
            tx.update_snapshot(snapshot_properties={"pad": str(pad)}).fast_append(),
        ):
            pass
    # Killed right before that commit: nothing of it, nothing expired.
    flow.killed_at("iceberg.before_commit:1")
    assert {s.snapshot_id for s in table.refresh().snapshots()} >= made
    assert assert_no_record_twice(table_sink) >= held
    flow.killed_at("iceberg.after_commit:1")
    table = table.refresh()
    assert len(table.metadata.snapshots) == 100
    assert not made & {s.snapshot_id for s in table.snapshots()}  # the sink's all expired
    summary = table.current_snapshot().summary.additional_properties
    assert sum(name.startswith(COVERAGE_PREFIX) for name in summary) == PARTITIONS
    assert assert_no_record_twice(table_sink) >= held
    flow.finishes()
    assert table_sink.record_ids() == expected_ids(crash.root)
    spec = flow_spec(table_sink, crash.root)
    crash.flow(spec, recovery=crash.root / "fresh-recovery").finishes()
    assert table_sink.record_ids() == expected_ids(crash.root)
