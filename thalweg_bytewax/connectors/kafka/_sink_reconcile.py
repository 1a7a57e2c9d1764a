"""Private: what earlier attempts of a ``KafkaSink`` already wrote, read back from the topic.

Every record a ``KafkaSink`` produces starts with its locator header (source topic,
partition, offset, record id packed in ``_twg.locator``; see ``_sink_records``). On
resume a sink partition reads its output partitions from the positions its last snapshot
stored (the end offsets right after that epoch's flush: everything it wrote later lies
beyond them) to their current end, and collects per source partition the offsets and
record ids found. The epoch-sink base then skips replayed rows at those offsets and
checks them by record id, exactly as the Parquet lane does from its file names.

Without a stored position (the first run, or a crash before the first snapshot) the
whole partition is read from its earliest offset, since an attempt that never reached a
snapshot may still have written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.errors import SinkTerminalError, SinkTransientError
from thalweg_bytewax.records.ids import RECORD_ID_BYTES
from thalweg_bytewax.runtime.parts import encode_part

from ._errors import is_fatal
from ._sink_records import HEADER_LOCATOR, Locator, parse_locator

__all__ = ["Written", "end_offsets", "read_written"]

logger = logging.getLogger(__name__)

_BATCH = 10_000
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


@dataclass
class Written:
    """The source offsets (and record ids) of one source partition found in the topic."""

    offsets: list[int] = field(default_factory=list)
    record_ids: list[bytes | None] = field(default_factory=list)

    def coverage(self) -> OffsetCoverage:
        """The offsets as gap-aware spans (a partial epoch leaves gaps)."""
        if not self.offsets:
            return OffsetCoverage()
        arr = np.unique(np.asarray(self.offsets, dtype=np.int64))
        breaks = np.flatnonzero(np.diff(arr) != 1)
        starts = np.concatenate(([arr[0]], arr[breaks + 1]))
        ends = np.concatenate((arr[breaks], [arr[-1]]))
        return OffsetCoverage(zip(starts.tolist(), ends.tolist(), strict=True))

    def held(self, first: int, last: int, offset_col: str, rid_col: str) -> pa.Table:
        """The ``(offset, record id)`` pairs in ``[first, last]`` as a table."""
        off = np.asarray(self.offsets, dtype=np.int64)
        keep = np.flatnonzero((off >= first) & (off <= last))
        return pa.table(
            {
                offset_col: pa.array(off[keep], pa.int64()),
                rid_col: pa.array(
                    [self.record_ids[i] for i in keep.tolist()], pa.binary(RECORD_ID_BYTES)
                ),
            }
        )


def end_offsets(
    consumer: Consumer, topic: str, partitions: list[int], timeout_s: float, component: str
) -> dict[int, int]:
    """The current end offset of each output partition, in one request per broker.

    Transient errors (a leader moving while a broker restarts) are retried until
    ``timeout_s``; the last one is named if they outlast it.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        left = max(deadline - time.monotonic(), 0.1)
        try:
            found = consumer.offsets_for_times(
                [TopicPartition(topic, p, -1) for p in partitions], timeout=min(left, _ATTEMPT_S)
            )
        except KafkaException as exc:  # a timeout or an unreachable cluster
            err: KafkaError = exc.args[0]
            if is_fatal(err) or time.monotonic() + _RETRY_S >= deadline:
                msg = (
                    f"{component}: could not read the end offsets of topic `{topic}` within "
                    f"{timeout_s:g} s ({err.name()}); check that the brokers are reachable, "
                    f"or raise `unreachable_timeout`"
                )
                raise SinkTransientError(msg) from exc
            _refresh_metadata(consumer, topic, deadline - time.monotonic())
            continue
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


def _watermarks(
    consumer: Consumer, topic: str, p: int, deadline: float, timeout_s: float, component: str
) -> tuple[int, int]:
    """The low and high watermarks of ``topic:p``, retrying transient errors until ``deadline``.

    A just-created topic answers NOT_LEADER_FOR_PARTITION (or LEADER_NOT_AVAILABLE) until
    its leaders are elected, and a leader moves while a broker restarts: both pass.
    """
    while True:
        left = max(deadline - time.monotonic(), 0.1)
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=min(left, _ATTEMPT_S), cached=False
            )
            return low, high
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if is_fatal(err) or time.monotonic() + _RETRY_S >= deadline:
                msg = (
                    f"{component}: could not read the watermarks of `{topic}:{p}` within "
                    f"{timeout_s:g} s to reconcile on resume ({err.name()}); check that the "
                    f"brokers are reachable, or raise `unreachable_timeout`"
                )
                raise SinkTransientError(msg) from exc
            _refresh_metadata(consumer, topic, deadline - time.monotonic())


def _header(headers: list[tuple[str, bytes | None]] | None) -> Locator | None:
    """The locator of a record (its first header), or None if it has none."""
    if not headers or headers[0][0] != HEADER_LOCATOR:
        return None
    return parse_locator(headers[0][1])


def read_written(
    consumer: Consumer,
    topic: str,
    starts: dict[int, int | None],
    *,
    mine: Callable[[str], bool],
    timeout_s: float,
    component: str,
) -> tuple[dict[str, Written], int]:
    """Read output partitions from ``starts`` to their end; group what is found by source.

    Args:
        consumer: A consumer of the sink's cluster (isolation as the sink writes).
        topic: The output topic.
        starts: Output partition -> first offset to read (None: its earliest offset).
        mine: Whether a source partition key belongs to this sink partition.
        timeout_s: How long the whole read may take.
        component: The sink's name in messages.

    Returns:
        Per source partition key what it holds, and how many records were read.

    Raises:
        SinkTransientError: When the read does not finish in time.
        SinkTerminalError: On a fatal consumer error.
    """
    deadline = time.monotonic() + timeout_s
    watermarks = {
        p: _watermarks(consumer, topic, p, deadline, timeout_s, component) for p in starts
    }
    assign: list[TopicPartition] = []
    ends: dict[int, int] = {}
    for p, start in starts.items():
        low, high = watermarks[p]
        first = low if start is None else max(start, low)
        if first < high:
            assign.append(TopicPartition(topic, p, first))
            ends[p] = high
    found: dict[str, Written] = {}
    read = 0
    if not assign:
        return found, read
    consumer.assign(assign)
    deadline = time.monotonic() + timeout_s
    try:
        while ends:
            if time.monotonic() > deadline:
                msg = (
                    f"{component}: reading back `{topic}` partitions {sorted(ends)} to "
                    f"reconcile did not finish within {timeout_s:g} s; check the brokers or "
                    f"raise `unreachable_timeout`"
                )
                raise SinkTransientError(msg)
            for m in consumer.consume(_BATCH, timeout=0.2):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001
                        ends.pop(m.partition() or 0, None)
                        continue
                    if is_fatal(err):
                        msg = (
                            f"{component}: reading back `{topic}:{m.partition()}` failed: "
                            f"{err.name()}; check the topic and the consumer settings"
                        )
                        raise SinkTerminalError(msg)
                    continue
                read += 1
                part = m.partition() or 0
                offset = m.offset()
                if offset is not None and part in ends and offset + 1 >= ends[part]:
                    ends.pop(part)
                loc = _header(m.headers())  # type: ignore[arg-type]  # a list as consumed
                if loc is None:
                    continue  # written by someone else
                key = encode_part(loc.topic, loc.partition)
                if not mine(key):
                    continue
                w = found.get(key)
                if w is None:
                    w = found[key] = Written()
                w.offsets.append(loc.offset)
                w.record_ids.append(loc.record_id)
    finally:
        consumer.unassign()
    return found, read
