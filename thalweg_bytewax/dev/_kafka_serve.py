"""Apache Kafka in the foreground until SIGINT/SIGTERM: ``thalweg dev broker --kafka``.

Checks the tools it needs first (``java``; ``mvn`` while the jars are not cached), starts
an :class:`~thalweg_bytewax.dev._apache_kafka.ApacheKafka` of the nodes asked for,
publishes its bootstrap address in a file while it runs and withdraws it on the way out,
and fails, with the node's log, when a node stops on its own.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from thalweg_bytewax.dev._apache_kafka import ApacheKafka
from thalweg_bytewax.dev._kafka_jars import (
    KAFKA_VERSION,
    cache_dir_or_default,
    fetch_jars,
    missing_tools,
)
from thalweg_bytewax.dev._published import publish_line, withdraw_line
from thalweg_bytewax.errors import ConfigError

__all__ = ["serve"]


def serve(
    nodes: int,
    address_file: Path,
    *,
    data_dir: Path,
    cache_dir: Path | None = None,
    port: int | None = None,
) -> int:
    """Run Apache Kafka in the foreground until SIGINT/SIGTERM (``thalweg dev broker --kafka``).

    Publishes the bootstrap address in ``address_file`` while it runs. The data stays in
    ``data_dir`` between runs (a second start reuses it; ports may change unless ``port``
    fixes the first node's client port).
    """
    cached = (cache_dir_or_default(cache_dir) / KAFKA_VERSION / "complete").is_file()
    missing = missing_tools(need_maven=not cached)
    if missing is not None:
        msg = f"dev broker --kafka: {missing}; or run `thalweg dev broker` (no Java needed)"
        raise ConfigError(msg)
    jars = fetch_jars(cache_dir_or_default(cache_dir))
    kafka = ApacheKafka(jars, data_dir, nodes=nodes, port=port)
    stop = False

    def on_signal(*_: object) -> None:
        nonlocal stop
        stop = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        kafka.start()
        print(f"Apache Kafka {KAFKA_VERSION} at {kafka.bootstrap}; data in {data_dir}")  # noqa: T201
        publish_line(address_file, kafka.bootstrap)
        while not stop and len(kafka.running()) == nodes:
            time.sleep(0.5)
        if not stop:
            msg = f"dev broker --kafka: a node stopped; its log: {kafka.log_tail(0)}"
            raise ConfigError(msg)
    finally:
        withdraw_line(address_file, kafka.bootstrap)
        kafka.stop()
    return 0
