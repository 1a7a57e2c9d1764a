"""Private: the offsets of a ``KafkaSink``'s output partitions, read through an outage.

The sink reads its output partitions' end offsets after every epoch (where the next
read-back starts) and their watermarks when it reads back on resume. A broker
restarting moves leaders under these requests: transient errors are retried, asking
for fresh metadata between attempts, until the caller's bound, and the last one is
named if they outlast it.

Once every broker has been unreachable (the only node of a cluster restarting),
librdkafka forgets the brokers it learnt from the metadata and goes back to its
bootstrap servers (a re-bootstrap). Until a metadata answer names them again, its
cache names each partition's leader by a broker id it no longer knows, and an offset
request fails at once with ``_UNKNOWN_PARTITION``, as for a partition that does not
exist. That error is retried like a transient one while the topic's metadata cannot be
read or lists the partitions; it fails at once when the metadata, read, lacks them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
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

_UNKNOWN_PARTITION = KafkaError._UNKNOWN_PARTITION  # noqa: SLF001 - a public local error code


@dataclass(frozen=True, slots=True)
class _Read:
    """One offset read of ``partitions`` of ``topic``, and how its failures are named."""

    component: str
    topic: str
    partitions: list[int]
    what: str
    """What is read, as in "could not read <what>"."""
    timeout_s: float
    purpose: str = ""
    """Why, appended to "could not read <what>" (e.g. " to reconcile on resume")."""

    def outlasted(self, err: KafkaError) -> str:
        return (
            f"{self.component}: could not read {self.what} within {self.timeout_s:g} s"
            f"{self.purpose} ({err.name()}); check that the brokers are reachable, or raise "
            f"`unreachable_timeout`"
        )

    def refused(self, err: KafkaError) -> str:
        what = f"{self.what}{self.purpose}"
        return f"{self.component}: could not read {what} ({err.name()}: {err.str()})"

    def absent(self, err: KafkaError, partitions: list[int]) -> str:
        return (
            f"{self.component}: could not read {self.what}{self.purpose} ({err.name()}): "
            f"topic `{self.topic}` has no partition {', '.join(map(str, partitions))}"
        )


def _refresh_metadata(consumer: Consumer, read: _Read, left: float) -> list[int]:
    """Ask for the topic's metadata, so that the next attempt goes to its current leaders.

    Its answer also names the brokers again to a client that forgot them (see the
    module's docstring). A failure here is the outage the caller is retrying through:
    its own request reports it by name once the caller's bound has passed.

    Returns:
        Those of the read's partitions that the topic's metadata, read without error,
        lacks (none when it could not be read).
    """
    absent: list[int] = []
    try:
        md = consumer.list_topics(read.topic, timeout=min(left, _ATTEMPT_S))
    except KafkaException as exc:
        logger.debug("metadata refresh of `%s` failed: %s", read.topic, exc)
    else:
        found = md.topics.get(read.topic)
        if found is not None and found.error is None:
            absent = [p for p in read.partitions if p not in found.partitions]
    time.sleep(_RETRY_S)
    return absent


def _attempt(consumer: Consumer, read: _Read, deadline: float, call: Callable[[float], _T]) -> _T:
    """``call(wait)`` until it answers, retrying a transient error until ``deadline``.

    Each attempt waits :data:`_ATTEMPT_S` at most; between attempts the topic's metadata
    is asked for again, so the next one goes to the current leaders. ``_UNKNOWN_PARTITION``
    is retried too unless that metadata, read, lacks one of the partitions.

    Raises:
        SinkTransientError: Naming the error, when it is fatal or outlasts ``deadline``.
    """
    while True:
        left = max(deadline - time.monotonic(), 0.1)
        try:
            return call(min(left, _ATTEMPT_S))
        except KafkaException as exc:  # a timeout or an unreachable cluster
            err: KafkaError = exc.args[0]
            unknown = err.code() == _UNKNOWN_PARTITION
            if is_fatal(err) and not unknown:
                raise SinkTransientError(read.refused(err)) from exc
            if time.monotonic() + _RETRY_S >= deadline:
                raise SinkTransientError(read.outlasted(err)) from exc
            absent = _refresh_metadata(consumer, read, deadline - time.monotonic())
            if unknown and absent:
                raise SinkTransientError(read.absent(err, absent)) from exc
            logger.debug("%s: retrying after %s", read.component, err.name())


def end_offsets(
    consumer: Consumer, topic: str, partitions: list[int], timeout_s: float, component: str
) -> dict[int, int]:
    """The current end offset of each output partition, in one request per broker.

    Transient errors (a leader moving while a broker restarts, a client that forgot the
    brokers while all were away) are retried until ``timeout_s``; the last one is named
    if they outlast it.
    """
    deadline = time.monotonic() + timeout_s
    read = _Read(component, topic, partitions, f"the end offsets of topic `{topic}`", timeout_s)
    while True:
        found = _attempt(
            consumer,
            read,
            deadline,
            lambda wait: consumer.offsets_for_times(
                [TopicPartition(topic, p, -1) for p in partitions], timeout=wait
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
        _refresh_metadata(consumer, read, deadline - time.monotonic())


def partition_watermarks(
    consumer: Consumer, topic: str, p: int, deadline: float, timeout_s: float, component: str
) -> tuple[int, int]:
    """The low and high watermarks of ``topic:p``, retrying transient errors until ``deadline``.

    A just-created topic answers NOT_LEADER_FOR_PARTITION (or LEADER_NOT_AVAILABLE) until
    its leaders are elected, a leader moves while a broker restarts, and a client that
    forgot the brokers while all were away answers ``_UNKNOWN_PARTITION``: all pass.
    """
    read = _Read(
        component,
        topic,
        [p],
        f"the watermarks of `{topic}:{p}`",
        timeout_s,
        " to reconcile on resume",
    )
    return _attempt(
        consumer,
        read,
        deadline,
        lambda wait: consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=wait, cached=False
        ),
    )
