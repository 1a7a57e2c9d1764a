"""Two "pods" of a cluster through ``thalweg cluster``: one dies, both restart, exactly once.

Each pod is a process group with its own directory (its own recovery volume and lane
volume, as a StatefulSet's volumeClaimTemplates give each pod) and its own loopback
address (``127.R.S.2``, ``127.R.S.3``…: Linux routes all of 127.0.0.0/8 to the loopback
interface), started by the entry point with its process id and the cluster's addresses,
every pod's on the same port, so each listens only on its own address. Process 0
creates the recovery partitions on its volume; pod 1 is SIGKILLed mid-stream; pod 0's
process then fails on its own and exits non-zero, as it must for Kubernetes to restart it;
both start again with the same command (pod 1 first: it waits for process 0), resume from
the last committed epoch, and every Kafka record is in the lanes exactly once. A cluster
of two stopped mid-stream resumes as four the same way.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.fixtures.crash import THALWEG, CrashableFlow, CrashHarness, tail
from tests.helpers import pod_hosts
from tests.recovery.test_raw_lane_crash import fill, lane_vars
from thalweg_bytewax.cluster.recovery_init import partition_files
from thalweg_bytewax.lanes import read_lane

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

ARGV = [str(THALWEG), "cluster", "-s", "1", "-b", "0", "flows.raw_lane"]


def cluster(
    crash: CrashHarness, n: int, env: dict[str, str], lane: Path | None = None
) -> list[CrashableFlow]:
    """``n`` pods of one cluster; each one's lane on its own volume unless ``lane`` names
    storage all pods share."""
    addresses = cluster_addresses(n)
    return [
        crash.pod(i, ARGV, addresses, {**env, "THALWEG_RAW_LANE": str(lane or pod_lane(crash, i))})
        for i in range(n)
    ]


def pod_lane(crash: CrashHarness, process_id: int) -> Path:
    """The lane on pod ``process_id``'s own volume."""
    return crash.root / f"pod-{process_id}" / "lane"


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


def cluster_addresses(n: int) -> str:
    """``-a`` of ``n`` pods: an address of its own for each, one port for all."""
    hosts, (port,) = pod_hosts(n)
    return ";".join(f"{host}:{port}" for host in hosts)


def kill_pod_1_mid_stream(
    crash: CrashHarness, pods: list[Path], env: dict[str, str], lane: Path | None = None
) -> list[subprocess.Popen[str]]:
    """Start two pods, SIGKILL pod 1 (its process group) once rows land; return both
    (pod 0 still ending)."""
    procs = [pod.start() for pod in cluster(crash, 2, env, lane)]
    crash.wait_until(lambda: lane_rows(pods, lane).num_rows > 0, *procs, what="a row landing")
    crash.kill(procs[1])
    return procs


def assert_exactly_once(
    pods: list[Path], expected: set[tuple[int, int]], lane: Path | None = None
) -> None:
    table = lane_rows(pods, lane)
    seen = list(zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True))
    assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} duplicate rows"
    assert set(seen) == expected


def test_a_killed_pod_ends_the_cluster_and_both_resume_exactly_once(
    crash: CrashHarness, kafka_bootstrap: str, make_topic: Any
) -> None:
    topic = make_topic()
    expected = fill(kafka_bootstrap, topic)
    env = lane_vars(kafka_bootstrap, topic, crash.root / "unused")
    pods = [crash.root / "pod-0", crash.root / "pod-1"]

    procs = kill_pod_1_mid_stream(crash, pods, env)
    err = crash.wait(procs[0], timeout_s=60)
    assert procs[0].returncode not in (0, None), tail(err)
    assert "thalweg cluster: process 0 ended with exit code" in err, tail(err)
    written = lane_rows(pods).num_rows
    assert 0 < written < len(expected), "the kill should fall mid-stream"
    parts = {p.name: p.stat().st_ino for p in partition_files(pods[0] / "recovery")}
    assert len(parts) == 2
    assert partition_files(pods[1] / "recovery") == []

    # The restarted pod 1 comes back first and waits for process 0, as after a backoff.
    pod_0, pod_1 = cluster(crash, 2, env)
    procs = [pod_1.start()]
    time.sleep(3)
    procs.insert(0, pod_0.start())
    crash.finish(*procs, timeout_s=180)
    # The restart kept the store: a fresh one would replay from offset 0 (duplicates).
    assert {p.name: p.stat().st_ino for p in partition_files(pods[0] / "recovery")} == parts
    assert_exactly_once(pods, expected)


def test_a_cluster_of_two_resumes_as_four_with_its_recovery_store(
    crash: CrashHarness, kafka_bootstrap: str, make_topic: Any
) -> None:
    topic = make_topic()
    expected = fill(kafka_bootstrap, topic)
    env = lane_vars(kafka_bootstrap, topic, crash.root / "unused")
    pods = [crash.root / f"pod-{i}" for i in range(4)]
    # A rescale moves source partitions between processes: the lane must be where every
    # pod reaches it (a ReadWriteMany volume, an object store), or the process that takes
    # a partition over cannot see the files its old reader finalized after the last
    # committed epoch, and writes them again (docs/deploy.md).
    lake = crash.root / "shared-lane"

    for proc in kill_pod_1_mid_stream(crash, pods[:2], env, lake):
        crash.wait(proc, timeout_s=60)
    assert 0 < lane_rows(pods, lake).num_rows < len(expected)

    # Scaled to four replicas: pods 2 and 3 start with empty recovery volumes, the store
    # stays process 0's (two partitions, made for two processes), every source partition
    # resumes where it stopped, whichever process now reads it.
    errs = crash.finish(*(pod.start() for pod in cluster(crash, 4, env, lake)), timeout_s=180)
    # Each pod's process knows the cluster it runs in, so it reads only the source
    # partitions placed on its own workers (Bytewax would otherwise place them).
    assert not [e for e in errs if "cluster's size is unknown" in e], tail(errs[0])
    assert len(partition_files(pods[0] / "recovery")) == 2
    assert all(partition_files(p / "recovery") == [] for p in pods[1:])
    assert_exactly_once(pods, expected, lake)
