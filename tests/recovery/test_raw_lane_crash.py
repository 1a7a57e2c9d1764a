"""Kill the raw-lane flow mid-stream, resume it: every record lands exactly once.

Runs ``python -m bytewax.run flows.raw_lane`` through the ``crash`` harness
(tests/fixtures/crash.py) on a recovery store, SIGKILLs it (by a fault-injection hook at
a precise point, or from outside at an arbitrary moment), starts it again and reads the
lane back.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow.parquet as pq
import pytest

from tests.fixtures.crash import CrashableFlow, CrashHarness
from tests.helpers import cluster_addresses
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.testing import produce

pytestmark = pytest.mark.slow

PARTITIONS = 4
PER_PARTITION = 2500


def fill(bootstrap: str, topic: str) -> set[tuple[int, int]]:
    produce(
        bootstrap,
        topic,
        [
            {"key": f"k{i}".encode(), "value": f"order-{p}-{i}".encode() * 4, "partition": p}
            for i in range(PER_PARTITION)
            for p in range(PARTITIONS)
        ],
    )
    return {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}


class Filled(NamedTuple):
    """A topic filled with records and the lane the flow writes them to."""

    topic: str
    expected: set[tuple[int, int]]
    lane: Path


@pytest.fixture
def filled(kafka_bootstrap: str, make_topic: Any, crash: CrashHarness) -> Filled:
    topic = make_topic()
    return Filled(topic, fill(kafka_bootstrap, topic), crash.root / "lane")


def lane_vars(bootstrap: str, topic: str, lane: Path, **extra: str) -> dict[str, str]:
    """The raw-lane flow's variables: ``topic`` into ``lane``, throttled to fall mid-stream."""
    return {
        "THALWEG_BOOTSTRAP_SERVERS": bootstrap,
        "THALWEG_TOPICS": topic,
        "THALWEG_RAW_LANE": str(lane),
        "THALWEG_TAIL": "0",
        "THALWEG_BATCH_SIZE": "250",
        "THALWEG_MAX_RECORDS_PER_S": "800",
        **extra,
    }


def raw_lane(
    crash: CrashHarness, bootstrap: str, filled: Filled, *extra: str, **variables: str
) -> CrashableFlow:
    """``flows.raw_lane`` on the test's recovery store, a snapshot every second."""
    env = lane_vars(bootstrap, filled.topic, filled.lane, **variables)
    return crash.flow("flows.raw_lane", *extra, env=env, snapshot_s=1)


def assert_exactly_once(lane: Path, expected: set[tuple[int, int]]) -> None:
    table = read_lane(lane, ["_twg_source_partition", "_twg_source_offset"])
    seen = list(zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True))
    assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} duplicate rows in the lane"
    missing = expected - set(seen)
    assert not missing, f"{len(missing)} records missing, e.g. {sorted(missing)[:5]}"
    assert set(seen) == expected


def assert_no_partial_file_visible(lane: Path) -> None:
    for path in lane.rglob("*"):
        if path.is_file() and not path.name.startswith("."):
            pq.read_metadata(path)  # raises on a truncated or partial file


@pytest.mark.parametrize("fault", ["parquet.before_finalize:2", "parquet.after_finalize:2"])
def test_fault_injected_kill_then_resume_is_exactly_once(
    crash: CrashHarness, kafka_bootstrap: str, filled: Filled, fault: str
) -> None:
    flow, lane = raw_lane(crash, kafka_bootstrap, filled), filled.lane
    flow.killed_at(fault)
    assert_no_partial_file_visible(lane)
    before = read_lane(lane).num_rows if any(lane.rglob("*.parquet")) else 0
    assert 0 < before < len(filled.expected), "the crash should fall mid-stream"

    flow.finishes()
    assert_exactly_once(lane, filled.expected)
    assert not list(lane.rglob(".staging-*"))


def test_external_sigkill_at_arbitrary_moments_then_resume(
    crash: CrashHarness, kafka_bootstrap: str, filled: Filled
) -> None:
    flow = raw_lane(crash, kafka_bootstrap, filled)
    for delay in (2.5, 1.7):
        proc = flow.start()
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        assert_no_partial_file_visible(filled.lane)
    flow.finishes()
    assert_exactly_once(filled.lane, filled.expected)


def test_two_workers_in_one_process_land_every_record_once(
    crash: CrashHarness, kafka_bootstrap: str, filled: Filled
) -> None:
    fast = {"THALWEG_MAX_RECORDS_PER_S": "1000000"}
    raw_lane(crash, kafka_bootstrap, filled, "-w", "2", **fast).finishes()
    assert_exactly_once(filled.lane, filled.expected)


def test_two_processes_land_every_record_once(
    crash: CrashHarness, kafka_bootstrap: str, filled: Filled
) -> None:
    fast = {"THALWEG_MAX_RECORDS_PER_S": "1000000"}
    addresses = cluster_addresses(2)
    procs = [
        raw_lane(crash, kafka_bootstrap, filled, "-i", str(i), "-a", addresses, **fast).start()
        for i in range(2)
    ]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert_exactly_once(filled.lane, filled.expected)
