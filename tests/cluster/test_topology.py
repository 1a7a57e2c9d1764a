"""``thalweg cluster`` derives its process id and the ``-a`` list from the pod it runs in."""

from __future__ import annotations

import socket
import sys
import threading
from datetime import timedelta
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
from thalweg_bytewax.cluster.readiness import ClusterReadiness, missing_peers
from thalweg_bytewax.cluster.recovery_init import partition_files
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.observability.health import HealthRegistry

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

    wait_for_peers(
        ["a", "b", "a"],
        timeout=timedelta(seconds=10),
        resolve=resolve,
        sleep=sleep,
        clock=lambda: 0,
    )
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
            timeout=timedelta(seconds=5),
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
        snapshot_interval=timedelta(seconds=30),
        backup_interval=timedelta(0),
        runner_args=["-w", "2"],
    )
    assert argv == [
        sys.executable, "-m", "thalweg_bytewax.cluster.runner", "-i", "1", "-a", "p-0.s:2101;p-1.s:2101",
        "-r", "/data/recovery", "-s", "30", "-b", "0", "-w", "2",
        "thalweg_bytewax.flows.orders",
    ]  # fmt: skip
    no_recovery = cluster_argv(
        "my.module:flow",
        topology,
        recovery=None,
        snapshot_interval=timedelta(seconds=30),
        backup_interval=timedelta(0),
        runner_args=[],
    )
    assert no_recovery[-1] == "my.module:flow"
    assert "-r" not in no_recovery
    with pytest.warns(DeprecationWarning, match="`snapshot_interval_s` is deprecated; pass `snap"):
        old = cluster_argv(
            "orders",
            topology,
            recovery=Path("/data/recovery"),
            snapshot_interval_s=30,
            backup_interval=timedelta(0),
            runner_args=["-w", "2"],
        )
    assert old == argv
    with pytest.warns(DeprecationWarning, match="`backup_interval_s` is deprecated"):
        assert argv == cluster_argv(
            "orders",
            topology,
            recovery=Path("/data/recovery"),
            snapshot_interval=timedelta(seconds=30),
            backup_interval_s=0,
            runner_args=["-w", "2"],
        )
    with pytest.raises(ConfigError, match="`snapshot_interval` expected a datetime.timedelta"):
        cluster_argv("orders", topology, recovery=None, snapshot_interval=30,  # type: ignore[arg-type]
                     backup_interval=timedelta(0), runner_args=[])  # fmt: skip


def test_the_old_peer_wait_keywords_warn_and_land_on_the_new() -> None:
    rounds: list[float] = []
    resolvable = {"a"}

    def resolve(host: str, _port: object) -> object:
        if host not in resolvable:
            raise socket.gaierror(host)
        return [host]

    def sleep(s: float) -> None:
        rounds.append(s)
        resolvable.add("b")

    def wait(**durations: object) -> list[float]:
        rounds.clear()
        resolvable.discard("b")
        wait_for_peers(["a", "b"], resolve=resolve, sleep=sleep, clock=lambda: 0, **durations)  # type: ignore[arg-type]
        return list(rounds)

    with pytest.warns(
        DeprecationWarning, match="`timeout_s` is deprecated; pass `timeout=timedelta"
    ):
        assert wait(timeout_s=10) == [1.0]
    with pytest.warns(DeprecationWarning, match="`interval_s` is deprecated; pass `interval="):
        assert wait(timeout=timedelta(seconds=10), interval_s=2.5) == [2.5]
    assert wait(timeout=timedelta(seconds=10), interval=timedelta(seconds=2.5)) == [2.5]
    with pytest.raises(ConfigError, match="wait_for_peers: `timeout` is required"):
        wait()
    with pytest.warns(DeprecationWarning), pytest.raises(ConfigError, match="keep `timeout`"):
        wait(timeout=timedelta(seconds=1), timeout_s=1)


def test_partitions_next_to_an_unmarked_staging_directory_are_refused(tmp_path: Path) -> None:
    # No start leaves this (a staging set is made only while the directory holds none):
    # keep the store as it is and say what to remove, rather than guess.
    store = tmp_path / "recovery"
    assert ensure_recovery_partitions(store, 2, process_id=0)
    (store / ".thalweg-recovery-init").mkdir()
    with pytest.raises(ClusterError) as info:
        ensure_recovery_partitions(store, 2, process_id=0)
    assert "remove" in str(info.value) and ".thalweg-recovery-init" in str(info.value)
    assert len(partition_files(store)) == 2


def test_the_peers_connections_are_read_from_this_process() -> None:
    # Real sockets of this process on two loopback addresses: process 1 of three made a
    # connection to process 0's address, and process 2 connected to process 1's.
    hosts = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    listeners = []
    for host in hosts[:2]:
        s = socket.socket()
        s.bind((host, 0))
        s.listen()
        listeners.append(s)
    addresses = [f"{h}:{s.getsockname()[1]}" for h, s in zip(hosts, listeners, strict=False)]
    addresses.append(f"{hosts[2]}:1")
    assert missing_peers(1, addresses) == [addresses[0], addresses[2]]
    to_0 = socket.create_connection(listeners[0].getsockname())
    from_2 = socket.create_connection(listeners[1].getsockname())
    accepted = [listeners[0].accept()[0], listeners[1].accept()[0]]
    try:
        # Process 2's connection comes from 127.0.0.1 here (not its own address), so it
        # is counted, not named; process 0 is named by the address this process dialled.
        assert missing_peers(1, addresses) == []
        to_0.close()
        accepted[0].close()
        assert missing_peers(1, addresses) == [addresses[0]]
        from_2.close()
        accepted[1].close()
        assert missing_peers(1, addresses) == [addresses[0], addresses[2]]
    finally:
        for s in [*listeners, *accepted, to_0, from_2]:
            s.close()
    assert missing_peers(0, addresses, proc=Path("/nonexistent")) is None


def test_readiness_waits_for_the_peers_and_the_dataflow_and_a_lost_peer_ends_it() -> None:
    health = HealthRegistry()
    missing: list[str] = ["b:1"]
    readiness = ClusterReadiness(0, ["a:1", "b:1"], health=health, missing=lambda: missing)
    assert health.ready() == (
        False,
        [
            "cluster `formation`: forming: process 0 of 2 waits for every peer to connect "
            "and the cluster to start its first epoch"
        ],
    )
    readiness.check()
    assert health.ready()[1] == [
        "cluster `formation`: forming: process 0 of 2 waits for its peer(s) b:1 to connect"
    ]
    missing.clear()
    readiness.check()  # connected, but the dataflow has not started: not formed yet
    assert health.ready()[1] == [
        "cluster `formation`: forming: process 0 of 2 has every peer connected and waits "
        "for the cluster to agree on the epoch to resume from and start the flow"
    ]
    readiness.dataflow_started()
    assert health.ready() == (True, [])
    assert readiness.formed
    missing.append("b:1")
    readiness.check()
    lost = (
        "cluster `formation`: lost the connection to peer(s) b:1: this process ends, "
        "and the cluster forms again once every pod restarted"
    )
    assert health.ready() == (False, [lost])
    missing.clear()  # a reconnection cannot happen; readiness stays lost for good
    readiness.check()
    assert health.ready() == (False, [lost])
    assert not readiness.formed


def test_without_proc_readiness_follows_the_dataflow_alone() -> None:
    health = HealthRegistry()
    readiness = ClusterReadiness(1, ["a:1", "b:1"], health=health, missing=lambda: None)
    readiness.check()
    assert not health.ready()[0]
    readiness.dataflow_started()
    assert health.ready() == (True, [])


def test_the_readiness_watch_takes_its_interval_as_a_timedelta_and_the_old_name_warns() -> None:
    checked = threading.Event()

    def missing() -> list[str]:
        checked.set()
        return []

    for interval in ({"interval": timedelta(milliseconds=1)}, {"interval_s": 0.001}):
        checked.clear()
        readiness = ClusterReadiness(0, ["a:1"], health=HealthRegistry(), missing=missing)
        if "interval_s" in interval:
            with pytest.warns(DeprecationWarning, match="`interval_s` is deprecated; pass `int"):
                thread = readiness.watch(**interval)
        else:
            thread = readiness.watch(**interval)
        try:
            assert checked.wait(30)  # the watch ran its check on that interval
        finally:
            readiness.stop()
            thread.join(30)
    with pytest.raises(ConfigError, match="`interval` expected a datetime.timedelta; got 0.5"):
        ClusterReadiness(0, ["a:1"], health=HealthRegistry()).watch(0.5)  # type: ignore[arg-type]
