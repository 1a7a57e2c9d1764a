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
from datetime import timedelta
from typing import Any

from thalweg_bytewax.cluster.topology import ClusterError
from thalweg_bytewax.config import UNSET, Unset, duration_keyword

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
    timeout: timedelta | Unset = UNSET,
    interval: timedelta | Unset = UNSET,
    resolve: Callable[..., Any] = socket.getaddrinfo,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    timeout_s: float | Unset = UNSET,
    interval_s: float | Unset = UNSET,
) -> None:
    """Return once every host resolves; raise if some still do not after ``timeout``.

    Args:
        hosts: The peers' host names (this process's own included).
        timeout: How long to wait in all (required; ``timedelta(0)``: look once).
        interval: Pause between rounds (default 1 s).
        resolve: Name resolution, ``socket.getaddrinfo`` by default.
        clock: Monotonic seconds.
        sleep: Pauses between rounds, in seconds.
        timeout_s: Deprecated: ``timeout`` in seconds.
        interval_s: Deprecated: ``interval`` in seconds.

    Raises:
        ClusterError: Names the hosts that did not resolve in time and what to check.
        ConfigError: When ``timeout`` is missing, or a duration is no ``timedelta``, is
            negative or is given under both names.
    """
    wait = duration_keyword("wait_for_peers", "timeout", timeout, "timeout_s", timeout_s, zero=True)
    pause = duration_keyword(
        "wait_for_peers",
        "interval",
        interval,
        "interval_s",
        interval_s,
        default=timedelta(seconds=1),
    )
    pending = list(dict.fromkeys(hosts))
    deadline = clock() + wait
    while True:
        pending = [h for h in pending if not _resolves(h, resolve)]
        if not pending:
            return
        if clock() >= deadline:
            msg = (
                f"{len(pending)} peer name(s) did not resolve within {wait:g} s: "
                f"{', '.join(pending)}; check that every pod of the StatefulSet is "
                "scheduled, that THALWEG_CLUSTER_SIZE equals its replicas and "
                "THALWEG_CLUSTER_SERVICE names its headless service "
                "(publishNotReadyAddresses: true), or raise --peer-timeout"
            )
            raise ClusterError(msg)
        log.info("waiting for %d peer name(s) to resolve: %s", len(pending), ", ".join(pending))
        sleep(pause)
