"""Apache Kafka brokers (KRaft) on loopback ports, for tests and ``thalweg dev broker --kafka``.

The broker's jars come from Maven Central through Maven and are cached in a directory of
your choice (:mod:`~thalweg_bytewax.dev._kafka_jars`); each node is
a combined broker + controller JVM started from them. :class:`ApacheKafka` runs one node
or a small cluster, waits until every node answers a metadata request, and stops, kills
or restarts single nodes with their data, which is what tests of broker failures need.
It needs ``java`` (17+) on the ``PATH`` and, the first time, ``mvn``. The foreground
broker of ``thalweg dev broker --kafka`` is :mod:`~thalweg_bytewax.dev._kafka_serve`.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from confluent_kafka.admin import AdminClient

from thalweg_bytewax.config import UNSET, Unset, duration_keyword
from thalweg_bytewax.errors import ConfigError

from ._kafka_node import KafkaNode, broker_properties, cluster_id, java_command, prepare_node

__all__ = ["ApacheKafka", "free_port", "free_ports"]

_READY = timedelta(minutes=3)
"""How long a start waits for every node to answer, by default."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    return free_ports(1)[0]


def free_ports(count: int, *, avoid: frozenset[int] = frozenset()) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 that nothing listens on right now.

    Every socket stays bound until all are picked: ports picked one after another,
    each socket closed before the next bind, can come back equal, and a broker whose
    client and controller listeners share a port refuses to start.

    Args:
        count: How many ports.
        avoid: Ports not to hand out (e.g. one fixed by the caller).
    """
    with contextlib.ExitStack() as held:
        ports: list[int] = []
        while len(ports) < count:
            s = held.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
            if port not in avoid:
                ports.append(port)
        return ports


class ApacheKafka:
    """One Apache Kafka node, or a cluster of combined broker + controller nodes.

    Use as a context manager::

        with ApacheKafka(jars, tmp_dir, nodes=3) as kafka:
            print(kafka.bootstrap)

    Topics auto-create with 4 partitions (as librdkafka's mock cluster does) and keep
    their records whatever their timestamps (``log.retention.ms=-1``); internal
    topics replicate to every node (at most 3) with a minimum in-sync count of 1, so a
    cluster keeps serving transactions and groups while one node is down.

    Args:
        jars: The broker's jars (see :func:`fetch_jars`).
        home: A directory for each node's configuration, data and ``server.log``.
        nodes: How many nodes.
        heap_mb: Java heap of each node.
        overrides: Broker settings that replace or add to the defaults.
    """

    def __init__(
        self,
        jars: Path,
        home: Path,
        *,
        nodes: int = 1,
        heap_mb: int = 512,
        overrides: Mapping[str, str] | None = None,
        port: int | None = None,
    ) -> None:
        if nodes < 1:
            msg = f"ApacheKafka: `nodes` must be at least 1, got {nodes}"
            raise ConfigError(msg)
        self.jars = jars.resolve()
        self.home = home.resolve()
        self.heap_mb = heap_mb
        self.overrides = dict(overrides or {})
        fixed = frozenset() if port is None else frozenset({port})
        ports = free_ports(2 * nodes, avoid=fixed)
        self.nodes = [
            KafkaNode(i + 1, ports[2 * i], ports[2 * i + 1], home / f"node-{i + 1}")
            for i in range(nodes)
        ]
        if port is not None:  # the first node's client port, fixed (`dev broker --port`)
            self.nodes[0].port = port

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of every node."""
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def node_bootstrap(self, index: int) -> str:
        """``host:port`` of node ``index`` (0-based)."""
        return f"127.0.0.1:{self.nodes[index].port}"

    def _java(self, node: KafkaNode, *args: str) -> list[str]:
        return java_command(self.jars, self.heap_mb, node, *args)

    def start(
        self, timeout: timedelta | Unset = UNSET, *, timeout_s: float | Unset = UNSET
    ) -> ApacheKafka:
        """Format every node's storage (first start only), start them and wait until ready.

        Args:
            timeout: How long to wait for every node to answer (default 3 minutes).
            timeout_s: Deprecated: ``timeout`` in seconds.
        """
        bound = duration_keyword(
            "ApacheKafka.start", "timeout", timeout, "timeout_s", timeout_s, default=_READY
        )
        cluster = cluster_id(self.home, self.nodes[0], self._java(self.nodes[0]))
        for node in self.nodes:
            props = broker_properties(node, self.nodes, self.overrides)
            prepare_node(node, props, self._java(node), cluster)
        for index in range(len(self.nodes)):
            self.start_node(index, wait=False)
        self.wait_ready(timedelta(seconds=bound))
        return self

    def start_node(
        self,
        index: int,
        *,
        wait: bool = True,
        timeout: timedelta | Unset = UNSET,
        timeout_s: float | Unset = UNSET,
    ) -> None:
        """Start node ``index`` (0-based) on its ports and data; wait until it answers.

        Args:
            index: The node.
            wait: Whether to wait until it answers.
            timeout: How long to wait (default 3 minutes).
            timeout_s: Deprecated: ``timeout`` in seconds.
        """
        bound = duration_keyword(
            "ApacheKafka.start_node", "timeout", timeout, "timeout_s", timeout_s, default=_READY
        )
        node = self.nodes[index]
        if node.proc is not None and node.proc.poll() is None:
            return
        with (node.home / "stdout.log").open("ab") as out:
            node.proc = subprocess.Popen(
                self._java(node, "kafka.Kafka", str(node.config)),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        if wait:
            self.wait_ready(timedelta(seconds=bound))

    def stop_node(
        self,
        index: int,
        *,
        kill: bool = False,
        timeout: timedelta | Unset = UNSET,
        timeout_s: float | Unset = UNSET,
    ) -> None:
        """Stop node ``index`` by its pid: SIGTERM (a clean shutdown) or SIGKILL.

        Args:
            index: The node.
            kill: SIGKILL rather than SIGTERM.
            timeout: How long it may take to end before it is killed (default 1 minute).
            timeout_s: Deprecated: ``timeout`` in seconds.
        """
        bound = duration_keyword(
            "ApacheKafka.stop_node",
            "timeout",
            timeout,
            "timeout_s",
            timeout_s,
            default=timedelta(minutes=1),
        )
        node = self.nodes[index]
        proc, node.proc = node.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout=bound)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)

    def restart_node(self, index: int, *, kill: bool = False) -> None:
        """Stop node ``index`` and start it again with its data; wait until ready."""
        self.stop_node(index, kill=kill)
        self.start_node(index)

    def running(self) -> list[int]:
        """The indexes of nodes whose process is alive."""
        return [i for i, n in enumerate(self.nodes) if n.proc is not None and n.proc.poll() is None]

    def wait_ready(
        self, timeout: timedelta | Unset = UNSET, *, timeout_s: float | Unset = UNSET
    ) -> None:
        """Wait until every running node answers a metadata request listing all of them.

        Args:
            timeout: How long to wait (default 3 minutes).
            timeout_s: Deprecated: ``timeout`` in seconds.

        Raises:
            ConfigError: A node exited or the cluster was not ready in time (the message
                holds the end of the node's log).
        """
        bound = duration_keyword(
            "ApacheKafka.wait_ready", "timeout", timeout, "timeout_s", timeout_s, default=_READY
        )
        deadline = time.monotonic() + bound
        live = self.running()
        while True:
            for i in live:
                proc = self.nodes[i].proc
                if proc is not None and proc.poll() is not None:
                    msg = (
                        f"Apache Kafka node {i + 1} exited ({proc.returncode}): {self.log_tail(i)}"
                    )
                    raise ConfigError(msg)
            if all(self._answers(i, len(live)) for i in live):
                return
            if time.monotonic() > deadline:
                msg = (
                    f"Apache Kafka at {self.bootstrap} not ready within {bound:g} s: "
                    f"{self.log_tail(live[0] if live else 0)}"
                )
                raise ConfigError(msg)
            time.sleep(0.5)

    def _answers(self, index: int, brokers: int) -> bool:
        admin = AdminClient({"bootstrap.servers": self.node_bootstrap(index), "log_level": 0})
        try:
            md = admin.list_topics(timeout=2)
        except Exception:  # noqa: BLE001 - not up yet: any client error means "not ready"
            return False
        return len(md.brokers) >= brokers and md.controller_id >= 0

    def log_tail(self, index: int, chars: int = 2000) -> str:
        """The end of node ``index``'s log (``server.log`` then its stdout)."""
        home = self.nodes[index].home
        text = ""
        for name in ("server.log", "stdout.log"):
            with contextlib.suppress(OSError):
                text += (home / name).read_text(errors="replace")
        return text[-chars:]

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL after a minute)."""
        for index in range(len(self.nodes)):
            self.stop_node(index)

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
