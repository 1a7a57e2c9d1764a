"""Private: the offsets of a ``KafkaSink``'s output partitions, read through an outage.

The sink reads its output partitions' end offsets after every epoch (where the next
read-back starts) and their watermarks when it reads back on resume. A broker
restarting moves leaders under these requests: transient errors are retried, asking
for fresh metadata between attempts, until the caller's bound, and the last one is
named if they outlast it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from thalweg_bytewax.errors import SinkTransientError

from ._errors import is_fatal

__all__ = ["end_offsets", "partition_watermarks"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_RETRY_S = 0.2
"""Pause between attempts at an offset read that failed transiently."""
_ATTEMPT_S = 5.0
"""Longest wait of one attempt. A request to a leader that is gone waits for it until
its timeout: librdkafka learns the new leader only from a fresh metadata answer, which
is asked for between attempts (measured on a 3-node cluster with a node killed: without
it, the reads time out until the node is back; with it, they succeed as soon as the
controller has moved the leaders, ~11 s)."""


def _refresh_metadata(consumer: Consumer, topic: str, left: float) -> None:
    """Ask for ``topic``'s metadata, so that the next attempt goes to its current leaders.

    A failure here is the outage the caller is retrying through: its own request
    reports it by name once the caller's bound has passed.
    """
    try:
        consumer.list_topics(topic, timeout=min(left, _ATTEMPT_S))
    except KafkaException as exc:
        logger.debug("metadata refresh of `%s` failed: %s", topic, exc)
    time.sleep(_RETRY_S)


def _attempt(
    consumer: Consumer,
    topic: str,
    deadline: float,
    call: Callable[[float], _T],
    failure: Callable[[KafkaError], str],
) -> _T:
    """``call(wait)`` until it answers, retrying a transient error until ``deadline``.

    Each attempt waits :data:`_ATTEMPT_S` at most; between attempts ``topic``'s metadata
    is asked for again, so the next one goes to the current leaders.

    Raises:
        SinkTransientError: The message ``failure`` makes of the error, when it is fatal
            or outlasts ``deadline``.
    """
    while True:
        left = max(deadline - time.monotonic(), 0.1)
        try:
            return call(min(left, _ATTEMPT_S))
        except KafkaException as exc:  # a timeout or an unreachable cluster
            err: KafkaError = exc.args[0]
            if is_fatal(err) or time.monotonic() + _RETRY_S >= deadline:
                raise SinkTransientError(failure(err)) from exc
            _refresh_metadata(consumer, topic, deadline - time.monotonic())


def end_offsets(
    consumer: Consumer, topic: str, partitions: list[int], timeout_s: float, component: str
) -> dict[int, int]:
    """The current end offset of each output partition, in one request per broker.

    Transient errors (a leader moving while a broker restarts) are retried until
    ``timeout_s``; the last one is named if they outlast it.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        found = _attempt(
            consumer,
            topic,
            deadline,
            lambda wait: consumer.offsets_for_times(
                [TopicPartition(topic, p, -1) for p in partitions], timeout=wait
            ),
            lambda err: (
                f"{component}: could not read the end offsets of topic `{topic}` within "
                f"{timeout_s:g} s ({err.name()}); check that the brokers are reachable, "
                f"or raise `unreachable_timeout`"
            ),
        )
        failed = next((tp for tp in found if tp.error is not None or tp.offset < 0), None)
        if failed is None:
            return {tp.partition: tp.offset for tp in found}
        transient = failed.error is not None and not is_fatal(failed.error)
        if not transient or time.monotonic() + _RETRY_S >= deadline:
            msg = (
                f"{component}: could not read the end offset of `{topic}:{failed.partition}` "
                f"({failed.error.name() if failed.error else failed.offset}); check the brokers, "
                f"or raise `unreachable_timeout`"
            )
            raise SinkTransientError(msg)
        _refresh_metadata(consumer, topic, deadline - time.monotonic())


def partition_watermarks(
    consumer: Consumer, topic: str, p: int, deadline: float, timeout_s: float, component: str
) -> tuple[int, int]:
    """The low and high watermarks of ``topic:p``, retrying transient errors until ``deadline``.

    A just-created topic answers NOT_LEADER_FOR_PARTITION (or LEADER_NOT_AVAILABLE) until
    its leaders are elected, and a leader moves while a broker restarts: both pass.
    """
    return _attempt(
        consumer,
        topic,
        deadline,
        lambda wait: consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=wait, cached=False
        ),
        lambda err: (
            f"{component}: could not read the watermarks of `{topic}:{p}` within "
            f"{timeout_s:g} s to reconcile on resume ({err.name()}); check that the "
            f"brokers are reachable, or raise `unreachable_timeout`"
        ),
    )
