"""Private: a Kafka request retried while it fails transiently (a broker restarting).

A node that restarts leaves its partitions without a leader, and a single node leaves
the cluster unreachable, for seconds to a minute; requests made meanwhile fail with
transient errors (``_TRANSPORT``, ``_TIMED_OUT``, ``NOT_LEADER_FOR_PARTITION``). They are
repeated until the caller's bound, so the flow pauses instead of failing an epoch; a
fatal error, or one that needs the transaction aborted, is raised at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

from ._errors import is_fatal

__all__ = ["RETRY_PAUSE_S", "retried"]

T = TypeVar("T")

RETRY_PAUSE_S = 0.2
"""Pause between attempts of a request that failed transiently."""


def _transient(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    if not isinstance(err, KafkaError):
        return False
    return not is_fatal(err) and not err.txn_requires_abort()


def retried(call: Callable[[float], T], *, wait_s: float, request_s: float) -> T:
    """``call(timeout)``, repeated while it raises a transient ``KafkaException``.

    Args:
        call: The request; it gets the timeout of one attempt, in seconds.
        wait_s: How long transient failures are retried, from the first attempt.
        request_s: The longest timeout of one attempt (the rest of ``wait_s`` bounds it).

    Raises:
        KafkaException: A fatal error or one that needs the transaction aborted, at
            once; the last transient one once ``wait_s`` has passed.
    """
    deadline = time.monotonic() + wait_s
    while True:
        left = deadline - time.monotonic()
        try:
            return call(max(min(request_s, left), 0.1))
        except KafkaException as exc:
            if not _transient(exc) or time.monotonic() + RETRY_PAUSE_S >= deadline:
                raise
        time.sleep(RETRY_PAUSE_S)
