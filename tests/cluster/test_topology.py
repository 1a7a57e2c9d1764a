"""``thalweg cluster`` derives its process id and the ``-a`` list from the pod it runs in."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from thalweg_bytewax.cluster import (
    ClusterError,
    Topology,
    cluster_argv,
    ensure_recovery_partitions,
    topology_from_env,
    wait_for_peers,
)
from thalweg_bytewax.cluster.recovery_init import partition_files

SERVICE = {"THALWEG_CLUSTER_SIZE": "3", "THALWEG_CLUSTER_SERVICE": "thalweg-peers"}


def test_the_pod_ordinal_is_the_process_id_and_the_service_names_every_peer() -> None:
    topology = topology_from_env(SERVICE, "orders-2")
    assert topology.process_id == 2
    assert topology.addresses == (
        "orders-0.thalweg-peers:2101",
        "orders-1.thalweg-peers:2101",
        "orders-2.thalweg-peers:2101",
    )
    assert topology.runner_args() == ["-i", "2", "-a", ";".join(topology.addresses)]


def test_a_fully_qualified_hostname_a_namespaced_service_and_a_port() -> None:
    env = {
        **SERVICE,
        "THALWEG_CLUSTER_SERVICE": "peers.data.svc.cluster.local",
        "THALWEG_CLUSTER_PORT": "3000",
    }
    topology = topology_from_env(env, "my-flow-1.peers.data.svc.cluster.local")
    assert topology.process_id == 1
    assert topology.hosts == tuple(f"my-flow-{i}.peers.data.svc.cluster.local" for i in range(3))
    assert topology.addresses[0].endswith(":3000")


def test_explicit_variables_win_over_the_hostname() -> None:
    env = {**SERVICE, "THALWEG_PROCESS_ID": "0", "THALWEG_CLUSTER_NAME": "flow"}
    topology = topology_from_env(env, "laptop")
    assert topology.process_id == 0
    assert topology.hosts[1] == "flow-1.thalweg-peers"


def test_an_explicit_address_list_outside_kubernetes() -> None:
    env = {"THALWEG_CLUSTER_ADDRESSES": "10.0.0.1:2101; 10.0.0.2:2101", "THALWEG_PROCESS_ID": "1"}
    assert topology_from_env(env, "host") == Topology(1, ("10.0.0.1:2101", "10.0.0.2:2101"))


@pytest.mark.parametrize(
    ("env", "hostname", "says"),
    [
        (SERVICE, "laptop", "does not end in a StatefulSet ordinal"),
        ({}, "orders-0", "set THALWEG_CLUSTER_SIZE"),
        ({**SERVICE, "THALWEG_CLUSTER_SIZE": "two"}, "orders-0", "'two' is not an integer"),
        ({**SERVICE, "THALWEG_CLUSTER_SIZE": "0"}, "orders-0", "is below 1"),
        (SERVICE, "orders-3", "process id 3 is not below the cluster's size 3"),
        ({"THALWEG_CLUSTER_ADDRESSES": "a:1;b", "THALWEG_PROCESS_ID": "0"}, "x", "'b'"),
    ],
)
def test_a_cluster_that_cannot_be_formed_is_refused_with_what_to_set(
    env: dict[str, str], hostname: str, says: str
) -> None:
    with pytest.raises(ClusterError) as info:
        topology_from_env(env, hostname)
    assert says in str(info.value)


def test_the_peer_wait_returns_once_every_name_resolves() -> None:
    resolvable: set[str] = {"a"}
    rounds: list[float] = []

    def resolve(host: str, _port: object) -> object:
        if host not in resolvable:
            raise socket.gaierror(host)
        return [host]

    def sleep(s: float) -> None:
        rounds.append(s)
        resolvable.add("b")  # the second pod's record appears

    wait_for_peers(["a", "b", "a"], timeout_s=10, resolve=resolve, sleep=sleep, clock=lambda: 0)
    assert rounds == [1.0]


def test_the_peer_wait_is_bounded_and_names_the_missing_peers() -> None:
    now = [0.0]

    def resolve(host: str, _port: object) -> object:
        if host != "orders-0.peers":
            raise socket.gaierror(host)
        return [host]

    def sleep(s: float) -> None:
        now[0] += s

    with pytest.raises(ClusterError) as info:
        wait_for_peers(
            ["orders-0.peers", "orders-1.peers"],
            timeout_s=5,
            resolve=resolve,
            sleep=sleep,
            clock=lambda: now[0],
        )
    assert "1 peer name(s) did not resolve within 5 s: orders-1.peers" in str(info.value)
    assert now[0] == 5.0


def test_process_zero_creates_the_partitions_once_and_a_restart_keeps_them(
    tmp_path: Path,
) -> None:
    store = tmp_path / "recovery"
    assert ensure_recovery_partitions(store, 3, process_id=0)
    parts = partition_files(store)
    assert [p.name for p in parts] == ["part-0.sqlite3", "part-1.sqlite3", "part-2.sqlite3"]
    before = {p.name: p.stat().st_ino for p in parts}
    # A restart (Bytewax's own init would fail on them, a fresh set would lose the state).
    assert not ensure_recovery_partitions(store, 3, process_id=0)
    assert {p.name: p.stat().st_ino for p in partition_files(store)} == before
    assert sorted(p.name for p in store.iterdir()) == sorted(before)


def test_other_processes_create_no_partitions(tmp_path: Path) -> None:
    assert not ensure_recovery_partitions(tmp_path / "r", 2, process_id=1)
    assert (tmp_path / "r").is_dir()
    assert partition_files(tmp_path / "r") == []


def test_a_crashed_creation_is_redone(tmp_path: Path) -> None:
    store = tmp_path / "recovery"
    (store / ".thalweg-recovery-init").mkdir(parents=True)
    (store / ".thalweg-recovery-init" / "part-0.sqlite3").write_bytes(b"half")
    assert ensure_recovery_partitions(store, 2, process_id=0)
    assert len(partition_files(store)) == 2
    assert not (store / ".thalweg-recovery-init").exists()


def test_the_runner_command_line() -> None:
    topology = Topology(1, ("p-0.s:2101", "p-1.s:2101"))
    argv = cluster_argv(
        "orders",
        topology,
        recovery=Path("/data/recovery"),
        snapshot_interval_s=30,
        backup_interval_s=0,
        runner_args=["-w", "2"],
    )
    assert argv == [
        sys.executable, "-m", "bytewax.run", "-i", "1", "-a", "p-0.s:2101;p-1.s:2101",
        "-r", "/data/recovery", "-s", "30", "-b", "0", "-w", "2",
        "thalweg_bytewax.flows.orders",
    ]  # fmt: skip
    no_recovery = cluster_argv(
        "my.module:flow",
        topology,
        recovery=None,
        snapshot_interval_s=30,
        backup_interval_s=0,
        runner_args=[],
    )
    assert no_recovery[-1] == "my.module:flow"
    assert "-r" not in no_recovery
