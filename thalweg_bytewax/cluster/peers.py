"""Wait, bounded, until every peer's name resolves.

A StatefulSet's pods start together (``podManagementPolicy: Parallel``) and each pod's DNS
record appears only once the pod exists (and, unless the headless service publishes not
ready addresses, once it is ready): Bytewax given a name that does not resolve fails at
once, so the entry point waits for every name first.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from thalweg_bytewax.cluster.topology import ClusterError

__all__ = ["wait_for_peers"]

log = logging.getLogger(__name__)


def _resolves(host: str, resolve: Callable[..., Any]) -> bool:
    try:
        resolve(host, None)
    except (socket.gaierror, UnicodeError):
        return False
    return True


def wait_for_peers(
    hosts: Iterable[str],
    *,
    timeout_s: float,
    interval_s: float = 1.0,
    resolve: Callable[..., Any] = socket.getaddrinfo,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once every host resolves; raise if some still do not after ``timeout_s``.

    Args:
        hosts: The peers' host names (this process's own included).
        timeout_s: How long to wait in all.
        interval_s: Pause between rounds.
        resolve: Name resolution, ``socket.getaddrinfo`` by default.
        clock: Monotonic seconds.
        sleep: Pauses between rounds.

    Raises:
        ClusterError: Names the hosts that did not resolve in time and what to check.
    """
    pending = list(dict.fromkeys(hosts))
    deadline = clock() + timeout_s
    while True:
        pending = [h for h in pending if not _resolves(h, resolve)]
        if not pending:
            return
        if clock() >= deadline:
            msg = (
                f"{len(pending)} peer name(s) did not resolve within {timeout_s:g} s: "
                f"{', '.join(pending)}; check that every pod of the StatefulSet is "
                "scheduled, that THALWEG_CLUSTER_SIZE equals its replicas and "
                "THALWEG_CLUSTER_SERVICE names its headless service "
                "(publishNotReadyAddresses: true), or raise --peer-timeout"
            )
            raise ClusterError(msg)
        log.info("waiting for %d peer name(s) to resolve: %s", len(pending), ", ".join(pending))
        sleep(interval_s)
