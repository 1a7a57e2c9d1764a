"""Two "pods" of a cluster through ``thalweg cluster``: one dies, both restart, exactly once.

Each pod is a process group with its own directory (its own recovery volume and lane
volume, as a StatefulSet's volumeClaimTemplates give each pod), started by the entry point
with its process id and the cluster's addresses (loopback names, free ports). Process 0
creates the recovery partitions on its volume; pod 1 is SIGKILLed mid-stream; pod 0's
process then fails on its own and exits non-zero, as it must for Kubernetes to restart it;
both start again with the same command (pod 1 first: it waits for process 0), resume from
the last committed epoch, and every Kafka record is in the lanes exactly once. A cluster
of two stopped mid-stream resumes as four the same way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.helpers import cluster_addresses
from tests.recovery.test_raw_lane_crash import fill, flow_env
from thalweg_bytewax.cluster.recovery_init import partition_files
from thalweg_bytewax.lanes import read_lane

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[2]
THALWEG = Path(sys.executable).with_name("thalweg")


def start_pod(
    pod: Path, process_id: int, addresses: str, env: dict[str, str], lane: Path | None = None
) -> subprocess.Popen[str]:
    """One pod; its lane on its own volume unless ``lane`` names storage all pods share."""
    pod.mkdir(exist_ok=True)
    env = {
        **env,
        "THALWEG_RAW_LANE": str(lane or pod / "lane"),
        "THALWEG_PROCESS_ID": str(process_id),
        "THALWEG_CLUSTER_ADDRESSES": addresses.replace("127.0.0.1", "localhost"),
        "THALWEG_RECOVERY_DIR": str(pod / "recovery"),
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.Popen(
        [str(THALWEG), "cluster", "-s", "1", "-b", "0", "flows.raw_lane"],
        cwd=pod,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a pod: the entry point and the flow's process
    )


def lane_rows(pods: list[Path], shared: Path | None = None) -> pa.Table:
    """The lane rows of every pod (or of the lane they share), finalized files only."""
    candidates = [shared] if shared is not None else [p / "lane" for p in pods]
    lanes = [lane for lane in candidates if lane_files(lane)]
    columns = ["_twg_source_partition", "_twg_source_offset"]
    tables = [read_lane(lane, columns) for lane in lanes]
    return pa.concat_tables(tables) if tables else pa.table({c: [] for c in columns})


def lane_files(lane: Path) -> list[Path]:
    """The finalized files of a lane (not the staging files a write in progress holds)."""
    return [f for f in lane.rglob("*.parquet") if not f.name.startswith(".")]


def kill_pod_1_mid_stream(
    pods: list[Path], env: dict[str, str], lane: Path | None = None
) -> list[subprocess.Popen[str]]:
    """Start two pods, SIGKILL pod 1 once rows land; return both (pod 0 still ending)."""
    addresses = cluster_addresses(2)
    procs = [start_pod(pods[i], i, addresses, env, lane) for i in range(2)]
    deadline = time.monotonic() + 120
    while lane_rows(pods, lane).num_rows == 0:
        assert time.monotonic() < deadline, "the cluster wrote nothing"
        assert all(p.poll() is None for p in procs), [p.communicate()[1] for p in procs]
        time.sleep(0.2)
    os.killpg(procs[1].pid, signal.SIGKILL)
    return procs


def assert_exactly_once(
    pods: list[Path], expected: set[tuple[int, int]], lane: Path | None = None
) -> None:
    table = lane_rows(pods, lane)
    seen = list(zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True))
    assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} duplicate rows"
    assert set(seen) == expected


def test_a_killed_pod_ends_the_cluster_and_both_resume_exactly_once(
    kafka_bootstrap: str, make_topic: Any, tmp_path: Path
) -> None:
    topic = make_topic()
    expected = fill(kafka_bootstrap, topic)
    env = flow_env(kafka_bootstrap, topic, tmp_path / "unused")
    pods = [tmp_path / "pod-0", tmp_path / "pod-1"]

    procs = kill_pod_1_mid_stream(pods, env)
    procs[1].communicate(timeout=30)
    err = procs[0].communicate(timeout=60)[1]
    assert procs[0].returncode not in (0, None), err[-3000:]
    assert "thalweg cluster: process 0 ended with exit code" in err, err[-3000:]
    written = lane_rows(pods).num_rows
    assert 0 < written < len(expected), "the kill should fall mid-stream"
    parts = {p.name: p.stat().st_ino for p in partition_files(pods[0] / "recovery")}
    assert len(parts) == 2
    assert partition_files(pods[1] / "recovery") == []

    # The restarted pod 1 comes back first and waits for process 0, as after a backoff.
    addresses = cluster_addresses(2)
    procs = [start_pod(pods[1], 1, addresses, env)]
    time.sleep(3)
    procs.insert(0, start_pod(pods[0], 0, addresses, env))
    errs = [p.communicate(timeout=180)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-3000:] for e in errs]
    # The restart kept the store: a fresh one would replay from offset 0 (duplicates).
    assert {p.name: p.stat().st_ino for p in partition_files(pods[0] / "recovery")} == parts
    assert_exactly_once(pods, expected)


def test_a_cluster_of_two_resumes_as_four_with_its_recovery_store(
    kafka_bootstrap: str, make_topic: Any, tmp_path: Path
) -> None:
    topic = make_topic()
    expected = fill(kafka_bootstrap, topic)
    env = flow_env(kafka_bootstrap, topic, tmp_path / "unused")
    pods = [tmp_path / f"pod-{i}" for i in range(4)]
    # A rescale moves source partitions between processes: the lane must be where every
    # pod reaches it (a ReadWriteMany volume, an object store), or the process that takes
    # a partition over cannot see the files its old reader finalized after the last
    # committed epoch, and writes them again (docs/deploy.md).
    lake = tmp_path / "shared-lane"

    for proc in kill_pod_1_mid_stream(pods[:2], env, lake):
        proc.communicate(timeout=60)
    assert 0 < lane_rows(pods, lake).num_rows < len(expected)

    # Scaled to four replicas: pods 2 and 3 start with empty recovery volumes, the store
    # stays process 0's (two partitions, made for two processes), every source partition
    # resumes where it stopped, whichever process now reads it.
    addresses = cluster_addresses(4)
    procs = [start_pod(pods[i], i, addresses, env, lake) for i in range(4)]
    errs = [p.communicate(timeout=180)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [e[-3000:] for e in errs]
    assert len(partition_files(pods[0] / "recovery")) == 2
    assert all(partition_files(p / "recovery") == [] for p in pods[1:])
    assert_exactly_once(pods, expected, lake)
