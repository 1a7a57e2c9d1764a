"""SIGKILL every table sink's flow at each named fault point, resume: every record once.

``tests/sinks/crash_flow.py`` (sample orders → raw Parquet lane; decode → DLQ lane and
the sink under test, two shards each) runs under ``python -m bytewax.run`` with a
recovery directory and an epoch per activation. One test per sink and worker count
kills it in turn at ``epoch_sink.before_commit`` (rows staged, commit not started),
``epoch_sink.mid_write`` (right after rows were staged, the epoch still open),
``epoch_sink.after_commit`` (committed, the epoch's snapshot not yet in the recovery
store) and the sink's own point where it has one, resuming each time, then lets it
finish. After every kill the table holds no record twice; at the end it holds exactly
the raw lane's records minus the decode rejects, by record id. The points fire in
whichever epoch sink of the process reaches them first (raw lane, DLQ or table), as a
crash would. Two OS processes (``-i 0|1 -a``) are killed and resumed the same way for
Iceberg and PostgreSQL, and both are killed after their commit in upsert mode too: each
key ends with its last row, and no replayed row is taken for a missing one.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.crash import CrashableFlow, CrashHarness
from tests.helpers import cluster_addresses
from tests.sinks.crash_flow import ORDERS, SHARDS, SLOTS
from tests.sinks.targets import C, SinkTarget
from thalweg_bytewax.lanes import read_lane

pytestmark = pytest.mark.slow

KILLS = ["epoch_sink.before_commit:2", "epoch_sink.mid_write:2", "epoch_sink.after_commit:1"]
"""The named points every sink's flow is killed at, in turn (``point:nth`` of a run)."""
OWN_KILLS = {"iceberg": "iceberg.after_commit:1", "postgres": "postgres.before_commit:1"}
"""A sink's own point inside its commit, where it has one."""


def flow_spec(target: SinkTarget, root: Path, shards: int = SHARDS, mode: str = "append") -> str:
    dsn = getattr(target, "dsn", getattr(target, "bootstrap", ""))
    schema = getattr(target, "schema", getattr(target, "topic", ""))
    args = f"{target.name!r}, {str(root)!r}, {dsn!r}, {schema!r}, {shards}, {mode!r}"
    return f"tests.sinks.crash_flow:build_flow({args})"


def sink_flow(
    crash: CrashHarness, target: SinkTarget, *extra: str, shards: int = SHARDS, mode: str = "append"
) -> CrashableFlow:
    """The crash flow writing into ``target``, run on the test's recovery store."""
    return crash.flow(flow_spec(target, crash.root, shards, mode), *extra)


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
    kills = [*KILLS, *([OWN_KILLS[table_sink.name]] if table_sink.name in OWN_KILLS else [])]
    flow = sink_flow(crash, table_sink, "-w", str(workers))
    for fault in kills:
        flow.killed_at(fault)
        assert_no_record_twice(table_sink)
    flow.finishes()
    assert assert_no_record_twice(table_sink) > 0
    assert table_sink.record_ids() == expected_ids(crash.root)


def test_partitions_moving_to_other_shards_between_killed_runs_land_once(
    table_sink: SinkTarget, crash: CrashHarness
) -> None:
    # Each run changes the shard count, so source partitions move to shards that have
    # no resume state for them (as when a topic gains partitions, which moves the
    # sorted index of others): the new owner must learn what the target holds.
    runs = [(2, "epoch_sink.after_commit:7"), (3, "epoch_sink.after_commit:4"), (4, None)]
    for shards, fault in runs:
        sink_flow(crash, table_sink, shards=shards).ends(fault)
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
    flow = sink_flow(crash, table_sink, shards=1, mode="upsert")  # one writer per upsert table
    crashed = [
        flow.killed_at(f) for f in ("epoch_sink.after_commit:4", "epoch_sink.after_commit:7")
    ]
    done = flow.finishes()
    assert "arrived after a resume" not in done.stderr + "".join(c.stderr for c in crashed)
    assert table_sink.record_ids() == last_per_slot(crash.root)


def run_two_processes(
    crash: CrashHarness, target: SinkTarget, fault: str | None
) -> list[subprocess.Popen[str]]:
    addresses = cluster_addresses(2)
    # Only process 1 is armed: it dies at the point; process 0 loses its peer.
    return [
        sink_flow(crash, target, "-i", str(i), "-a", addresses).start(fault if i == 1 else None)
        for i in range(2)
    ]


@pytest.mark.parametrize("table_sink", ["iceberg", "postgres"], indirect=True)
def test_two_processes_killed_mid_stream_and_resumed_hold_every_record_once(
    table_sink: SinkTarget, crash: CrashHarness
) -> None:
    armed, peer = run_two_processes(crash, table_sink, "epoch_sink.after_commit:2")[::-1]
    armed_err = armed.communicate(timeout=120)[1]
    try:
        peer_err = peer.communicate(timeout=20)[1]  # its peer is gone: it fails, or we end it
    except subprocess.TimeoutExpired:
        peer.kill()
        peer_err = peer.communicate()[1]
    assert armed.returncode == -signal.SIGKILL, (armed_err[-2000:], peer_err[-2000:])
    held = assert_no_record_twice(table_sink)
    procs = run_two_processes(crash, table_sink, None)
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for e in errs]
    assert assert_no_record_twice(table_sink) > held
    assert table_sink.record_ids() == expected_ids(crash.root)
