"""``/ready`` of a cluster's process: false until the cluster formed, again once a peer is lost.

The health registry is ready while no readiness-critical component is down, so a
process whose server starts before the cluster forms would answer ready while it still
waits for its peers. :class:`ClusterReadiness` registers the critical component
``cluster`` / ``formation``, down until two things hold in this process:

* **every peer is connected**: Bytewax (timely) connects each process to the ones
  before it in the ``-a`` list and accepts a connection from each one after it, before
  any worker starts; this process's established TCP connections to those addresses
  (and to its own), found among its file descriptors (``/proc/self/fd``, each
  socket's state from ``TCP_INFO``), are counted;
* **the dataflow runs**: :func:`add_formation_probe` adds to the flow an input that
  emits nothing and ends at its first poll. Bytewax polls it only once this process's
  workers run the flow itself, which is after the cluster agreed on the epoch to resume
  from (with recovery: every worker of every process read the store's progress).

Once formed, a watch thread checks the peers' connections every ``interval_s``: a
connection that closes (the peer died, was killed, its node left) turns the component
down again, naming the peer, in the moment before Bytewax's own threads end the
process. Where ``/proc`` or ``TCP_INFO`` is not there (not Linux), the connections are
not counted: the component turns ready when the dataflow runs, and a lost peer shows
only as the process's end.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from bytewax.dataflow import Dataflow
from bytewax.inputs import DynamicSource, StatelessSourcePartition

from thalweg_bytewax.config import UNSET, Unset, duration_keyword
from thalweg_bytewax.observability.health import Component, HealthRegistry, registry

__all__ = ["FORMATION_STEP", "ClusterReadiness", "add_formation_probe", "missing_peers"]

log = logging.getLogger(__name__)

FORMATION_STEP = "thalweg_cluster_formation"
"""The step id of the input :func:`add_formation_probe` adds (stateless: no recovery key)."""

_TCP_ESTABLISHED = 1
"""``tcpi_state`` of an established connection (``TCP_INFO``'s first byte, Linux)."""
_Address = tuple[str, int]


def _address(raw: tuple[Any, ...]) -> _Address:
    ip = ipaddress.ip_address(raw[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(raw[1])


def _established(proc: Path) -> Iterator[tuple[_Address, _Address]]:
    """This process's established TCP connections: ``(local, remote)``.

    Each socket among the process's file descriptors is read through a duplicate of its
    descriptor (closed at once; the original stays as it was): its state from
    ``TCP_INFO``, its two ends from ``getsockname`` / ``getpeername``. No table of the
    host's connections is walked, so the cost is that of this process's few sockets.
    """
    fds = f"{proc}/fd"
    for fd in os.listdir(fds):
        try:
            if not os.readlink(f"{fds}/{fd}").startswith("socket:["):
                continue
            dup = os.dup(int(fd))
        except OSError:  # closed meanwhile
            continue
        try:
            sock = socket.socket(fileno=dup)
        except OSError:  # a family this Python cannot open: not a TCP connection
            os.close(dup)
            continue
        with sock:
            if sock.type != socket.SOCK_STREAM or sock.family not in _INET:
                continue
            try:
                state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
                if state != _TCP_ESTABLISHED:
                    continue
                yield _address(sock.getsockname()), _address(sock.getpeername())
            except OSError:
                continue


_INET = (socket.AF_INET, socket.AF_INET6)


def _resolve(address: str) -> set[_Address]:
    host, _, port = address.rpartition(":")
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except socket.gaierror:
        return set()
    return {(str(info[4][0]), int(info[4][1])) for info in infos}


def missing_peers(
    process_id: int, addresses: Sequence[str], *, proc: Path = Path("/proc/self")
) -> list[str] | None:
    """The peers this process has no established connection with, or None without ``/proc``.

    A peer before this process in ``addresses`` is the remote end of the connection this
    process made to its address; a peer after it connected to this process's port from
    an ephemeral one, so it is known by its IP address when that is its own (a pod's),
    else only counted: then the missing ones are named as ``"K of ADDRESS, ..."``.

    Args:
        process_id: This process's index in ``addresses``.
        addresses: Every process's ``host:port`` (``-a``), in process-id order.
        proc: This process's ``/proc`` directory (only its ``fd`` list is read).
    """
    if not hasattr(socket, "TCP_INFO") or not (proc / "fd").is_dir():
        return None
    own = _resolve(addresses[process_id])  # the address Bytewax's listener bound
    before = {i: _resolve(addresses[i]) for i in range(process_id)}
    after = {
        i: {ip for ip, _ in _resolve(addresses[i])} for i in range(process_id + 1, len(addresses))
    }
    connected: set[int] = set()
    unattributed = 0
    for local, remote in _established(proc):
        if local in own:
            peer = next(
                (i for i, ips in after.items() if i not in connected and remote[0] in ips), None
            )
            if peer is None:
                unattributed += 1
            else:
                connected.add(peer)
        else:
            connected.update(i for i, resolved in before.items() if remote in resolved)
    missing = [addresses[i] for i in before if i not in connected]
    rest = [addresses[i] for i in after if i not in connected]
    short = len(rest) - unattributed
    if short > 0:
        missing += rest if unattributed == 0 else [f"{short} of {', '.join(rest)}"]
    return missing


class ClusterReadiness:
    """The ``cluster`` component of this process's health tree (see the module).

    Args:
        process_id: This process's id.
        addresses: Every process's ``host:port``, in process-id order.
        health: The registry to register in (the process's by default).
        missing: Reads the peers without a connection (:func:`missing_peers` by default).
    """

    def __init__(
        self,
        process_id: int,
        addresses: Sequence[str],
        *,
        health: HealthRegistry = registry,
        missing: Callable[[], list[str] | None] | None = None,
    ) -> None:
        self.process_id = process_id
        self.addresses = tuple(addresses)
        self._missing = missing or (lambda: missing_peers(process_id, self.addresses))
        self._lock = threading.Lock()
        self._running = False
        self._formed = False
        self._lost = False
        self._stop = threading.Event()
        self.component: Component = health.register("cluster", "formation", critical=True)
        self.component.down(
            f"forming: process {process_id} of {len(self.addresses)} waits for every peer "
            "to connect and the cluster to start its first epoch"
        )

    @property
    def formed(self) -> bool:
        """Whether the cluster formed (and no peer was lost since)."""
        return self._formed

    def dataflow_started(self) -> None:
        """The flow runs on this process's workers (the formation probe's first poll)."""
        with self._lock:
            self._running = True
        self.check()

    def check(self) -> None:
        """Set the component from the dataflow's start and the peers' connections."""
        missing = self._missing()
        with self._lock:
            if not self._running:
                if missing:
                    self.component.down(
                        f"forming: process {self.process_id} of {len(self.addresses)} "
                        f"waits for its peer(s) {'; '.join(missing)} to connect"
                    )
                elif missing is not None:
                    self.component.down(
                        f"forming: process {self.process_id} of {len(self.addresses)} has "
                        "every peer connected and waits for the cluster to agree on the "
                        "epoch to resume from and start the flow"
                    )
                return
            if self._lost:
                return  # for good: this process ends, the cluster forms again after
            if missing:
                # The workers run only once every peer connected: a peer missing now left.
                self._formed = False
                self._lost = True
                self.component.down(
                    f"lost the connection to peer(s) {'; '.join(missing)}: this process "
                    "ends, and the cluster forms again once every pod restarted"
                )
                log.error("cluster: %s", self.component.reason)
                return
            if not self._formed:
                self._formed = True
                self.component.ok()
                log.info("cluster formed: process %d of %d", self.process_id, len(self.addresses))

    def watch(
        self, interval: timedelta | Unset = UNSET, *, interval_s: float | Unset = UNSET
    ) -> threading.Thread:
        """Check every ``interval`` (default 0.5 s) in a daemon thread (until :meth:`stop`).

        ``interval_s`` is the deprecated name of ``interval``, in seconds.

        Raises:
            ConfigError: When ``interval`` is no positive ``timedelta``, or given under
                both names.
        """
        pause = duration_keyword(
            "cluster readiness watch",
            "interval",
            interval,
            "interval_s",
            interval_s,
            default=timedelta(seconds=0.5),
        )

        def run() -> None:
            while not self._stop.wait(pause):
                try:
                    self.check()
                except Exception:  # never end the watch: say why, keep the last status
                    log.exception("cluster: reading the peers' connections failed")

        thread = threading.Thread(target=run, name="thalweg-cluster-watch", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """End the watch thread."""
        self._stop.set()


class _ProbePartition(StatelessSourcePartition[None]):
    def __init__(self, started: Callable[[], None]) -> None:
        self._started = started

    def next_batch(self) -> list[None]:
        self._started()
        raise StopIteration


class _FormationProbe(DynamicSource[None]):
    def __init__(self, started: Callable[[], None]) -> None:
        self._started = started

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _ProbePartition:
        return _ProbePartition(self._started)


def add_formation_probe(flow: Dataflow, started: Callable[[], None]) -> None:
    """Add to ``flow`` an input that calls ``started`` at its first poll and ends.

    It emits nothing and holds no state, so neither the flow's output nor its recovery
    store changes; Bytewax polls it once the workers of this process run the flow.
    """
    import bytewax.operators as op  # noqa: PLC0415 - only where a cluster runs

    op.input(FORMATION_STEP, flow, _FormationProbe(started))
