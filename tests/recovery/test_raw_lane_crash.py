"""Kill the raw-lane flow mid-stream, resume it: every record lands exactly once.

Runs ``python -m bytewax.run flows.raw_lane`` in a subprocess with a recovery
directory, SIGKILLs it (by a fault-injection hook at a precise point, or from outside at
an arbitrary moment), starts it again and reads the lane back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow.parquet as pq
import pytest

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
    """A topic filled with records, a lane path and an initialised recovery directory."""

    topic: str
    expected: set[tuple[int, int]]
    lane: Path
    recovery: Path


@pytest.fixture
def filled(kafka_bootstrap: str, make_topic: Any, tmp_path: Path) -> Filled:
    topic = make_topic()
    expected = fill(kafka_bootstrap, topic)
    return Filled(topic, expected, tmp_path / "lane", init_recovery(tmp_path / "recovery"))


def flow_env(bootstrap: str, topic: str, lane: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "THALWEG_FAULT"}
    env.update(
        {
            "THALWEG_BOOTSTRAP_SERVERS": bootstrap,
            "THALWEG_TOPICS": topic,
            "THALWEG_RAW_LANE": str(lane),
            "THALWEG_TAIL": "0",
            "THALWEG_BATCH_SIZE": "250",
            "THALWEG_MAX_RECORDS_PER_S": "800",
            **extra,
        }
    )
    return env


def init_recovery(path: Path, partitions: int = 1) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "bytewax.recovery", str(path), str(partitions)], check=True
    )
    return path


def bytewax_cmd(recovery: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bytewax.run",
        "flows.raw_lane",
        "-r",
        str(recovery),
        "-s",
        "1",
        "-b",
        "0",
        *extra,
    ]


def run(
    cmd: list[str], env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


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
    kafka_bootstrap: str, filled: Filled, fault: str
) -> None:
    topic, expected, lane, recovery = filled

    crashed = run(
        bytewax_cmd(recovery), flow_env(kafka_bootstrap, topic, lane, THALWEG_FAULT=fault)
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert_no_partial_file_visible(lane)
    before = read_lane(lane).num_rows if any(lane.rglob("*.parquet")) else 0
    assert 0 < before < len(expected), "the crash should fall mid-stream"

    resumed = run(bytewax_cmd(recovery), flow_env(kafka_bootstrap, topic, lane))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_exactly_once(lane, expected)
    assert not list(lane.rglob(".staging-*"))


def test_external_sigkill_at_arbitrary_moments_then_resume(
    kafka_bootstrap: str, filled: Filled
) -> None:
    topic, expected, lane, recovery = filled
    env = flow_env(kafka_bootstrap, topic, lane)
    for delay in (2.5, 1.7):
        proc = subprocess.Popen(
            bytewax_cmd(recovery), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        assert_no_partial_file_visible(lane)
    done = run(bytewax_cmd(recovery), env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_exactly_once(lane, expected)


def test_two_workers_in_one_process_land_every_record_once(
    kafka_bootstrap: str, filled: Filled
) -> None:
    topic, expected, lane, recovery = filled
    env = flow_env(kafka_bootstrap, topic, lane, THALWEG_MAX_RECORDS_PER_S="1000000")
    done = run(bytewax_cmd(recovery, "-w", "2"), env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_exactly_once(lane, expected)


def test_two_processes_land_every_record_once(
    kafka_bootstrap: str, filled: Filled
) -> None:
    topic, expected, lane, recovery = filled
    env = flow_env(kafka_bootstrap, topic, lane, THALWEG_MAX_RECORDS_PER_S="1000000")
    addresses = cluster_addresses(2)
    procs = [
        subprocess.Popen(
            bytewax_cmd(recovery, "-i", str(i), "-a", addresses),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert_exactly_once(lane, expected)
