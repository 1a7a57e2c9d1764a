"""Private: one node of :class:`~thalweg_bytewax.dev._apache_kafka.ApacheKafka` on disk.

A node is a combined broker + controller JVM on two loopback ports with a home
directory: :func:`broker_properties` writes its ``server.properties`` (the cluster's
defaults and the caller's overrides), :func:`java_command` starts a class of the broker's
jars for it, and :func:`prepare_node` writes its configuration and formats its storage
once under the cluster's id (:func:`cluster_id`, made once and kept beside the nodes).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from thalweg_bytewax.errors import ConfigError

__all__ = ["KafkaNode", "broker_properties", "cluster_id", "java_command", "prepare_node"]

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


@dataclass
class KafkaNode:
    """A node's id, client and controller ports, home directory and process."""

    node_id: int
    port: int
    controller_port: int
    home: Path
    proc: subprocess.Popen[bytes] | None = None
    config: Path = field(init=False)

    def __post_init__(self) -> None:
        self.config = self.home / "server.properties"


def broker_properties(
    node: KafkaNode, nodes: Sequence[KafkaNode], overrides: Mapping[str, str]
) -> dict[str, str]:
    """The ``server.properties`` of ``node`` in a cluster of ``nodes``, overrides applied."""
    count = len(nodes)
    voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in nodes)
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": (
            f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}"
        ),
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(node.home / "data"),
        "num.partitions": "4",
        "auto.create.topics.enable": "true",
        "default.replication.factor": str(min(count, 3)),
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": str(min(count, 3)),
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": str(min(count, 3)),
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": str(min(count, 3)),
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
        "background.threads": "2",
        "log.retention.check.interval.ms": "5000",
        # Keep records whatever their timestamp: sample orders and test corpora carry
        # fixed, old timestamps that the default 7-day time retention would delete
        # within seconds. A topic's own `retention.ms` still applies.
        "log.retention.ms": "-1",
    }
    props.update(overrides)
    return props


def java_command(jars: Path, heap_mb: int, node: KafkaNode, *args: str) -> list[str]:
    """The command running ``args`` (a class and its arguments) on the broker's jars."""
    return [
        "java",
        f"-Xmx{heap_mb}m",
        "-XX:+UseSerialGC",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={node.home / 'log4j2.properties'}",
        "-cp",
        f"{jars}/*",
        *args,
    ]


def prepare_node(
    node: KafkaNode, properties: Mapping[str, str], java: Sequence[str], cluster: str
) -> None:
    """Write the node's configuration; format its storage unless it holds some already.

    Args:
        node: The node.
        properties: Its ``server.properties``.
        java: The start of its command line (:func:`java_command` without arguments).
        cluster: The cluster's id.
    """
    node.home.mkdir(parents=True, exist_ok=True)
    lines = [f"{k}={v}" for k, v in properties.items()]
    node.config.write_text("\n".join(lines) + "\n")
    log4j = _LOG4J2.format(log=node.home / "server.log")
    (node.home / "log4j2.properties").write_text(log4j)
    if (node.home / "data" / "meta.properties").is_file():
        return
    fmt = [*java, "kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(node.config)]
    proc = subprocess.run(fmt, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        msg = f"formatting Apache Kafka storage of node {node.node_id} failed: {proc.stderr}"
        raise ConfigError(msg)


def cluster_id(home: Path, first: KafkaNode, java: Sequence[str]) -> str:
    """The cluster's id, kept in ``home/cluster.id``: made once by the broker's tool.

    Args:
        home: The cluster's directory.
        first: The node whose home the tool runs from (created here).
        java: The start of that node's command line (:func:`java_command`).
    """
    saved = home / "cluster.id"
    if saved.is_file():
        return saved.read_text().strip()
    first.home.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [*java, "kafka.tools.StorageTool", "random-uuid"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    made = proc.stdout.strip().splitlines()[-1]
    saved.write_text(made + "\n")
    return made
