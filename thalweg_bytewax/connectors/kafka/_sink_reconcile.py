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

A transactional sink reads with ``read_committed``, which stops at another producer's
open transaction (the last stable offset); it then goes on up to the marks noted when
the shard started, as ``_sink_stable`` explains.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.errors import SinkTerminalError, SinkTransientError
from thalweg_bytewax.records.ids import RECORD_ID_BYTES
from thalweg_bytewax.runtime.parts import encode_part

from ._errors import is_fatal
from ._sink_offsets import partition_watermarks
from ._sink_records import HEADER_LOCATOR, Locator, parse_locator
from ._sink_stable import last_own_offset

__all__ = ["Stable", "Written", "read_written"]

logger = logging.getLogger(__name__)

_BATCH = 10_000


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


def _header(headers: list[tuple[str, bytes | None]] | None) -> Locator | None:
    """The locator of a record (its first header), or None if it has none."""
    if not headers or headers[0][0] != HEADER_LOCATOR:
        return None
    return parse_locator(headers[0][1])


@dataclass
class Stable:
    """What a ``read_committed`` read-back needs to see past another's open transaction.

    Attributes:
        marks: Output partition -> its end as ``read_uncommitted`` saw it right after
            the shard's ``init_transactions`` (see ``_sink_stable``).
        uncommitted_config: Settings of a ``read_uncommitted`` consumer of the cluster.
        wait_s: How long to wait for an open transaction below this shard's records to
            be aborted (by its shard's next start, or by the broker's timeout).
    """

    marks: dict[int, int]
    uncommitted_config: dict[str, Any]
    wait_s: float


@dataclass
class _Tail:
    """Where the read-back of one output partition stands."""

    pos: int
    """The next offset the reader returns (past records it skipped as aborted too)."""
    end: int
    """The end the reader saw when the read-back started."""
    deadline: float
    at_end: bool = False
    until: int | None = None
    """Set while waiting: the offset the position must reach (past the shard's records)."""


class _Reader:
    """The read-back's consumers: the sink's own, and a ``read_uncommitted`` one on demand."""

    def __init__(self, consumer: Consumer, topic: str, stable: Stable | None) -> None:
        self.consumer = consumer
        self.topic = topic
        self.stable = stable
        self._uncommitted: Consumer | None = None

    def uncommitted(self) -> Consumer:
        if self._uncommitted is None:
            assert self.stable is not None  # noqa: S101 - only called with marks
            self._uncommitted = Consumer(self.stable.uncommitted_config)
        return self._uncommitted

    def position(self, p: int) -> int:
        """The reader's position in ``p`` (-1 when it has none yet)."""
        try:
            (tp,) = self.consumer.position([TopicPartition(self.topic, p)])
        except KafkaException:
            return -1
        return tp.offset

    def close(self) -> None:
        if self._uncommitted is not None:
            self._uncommitted.close()


def read_written(
    consumer: Consumer,
    topic: str,
    starts: dict[int, int | None],
    *,
    mine: Callable[[str], bool],
    timeout_s: float,
    component: str,
    stable: Stable | None = None,
) -> tuple[dict[str, Written], int]:
    """Read output partitions from ``starts`` to their end; group what is found by source.

    Args:
        consumer: A consumer of the sink's cluster (isolation as the sink writes).
        topic: The output topic.
        starts: Output partition -> first offset to read (None: its earliest offset).
        mine: Whether a source partition key belongs to this sink partition.
        timeout_s: How long the whole read may take.
        component: The sink's name in messages.
        stable: For a ``read_committed`` consumer: go on past the last stable offset
            until this shard's records below the marks are passed (see
            ``_sink_stable``). None reads to the end the consumer sees.

    Returns:
        Per source partition key what it holds, and how many records were read.

    Raises:
        SinkTransientError: When the read does not finish in time.
        SinkTerminalError: On a fatal consumer error.
    """
    deadline = time.monotonic() + timeout_s
    watermarks = {
        p: partition_watermarks(consumer, topic, p, deadline, timeout_s, component) for p in starts
    }
    marks = stable.marks if stable is not None else {}
    assign: list[TopicPartition] = []
    tails: dict[int, _Tail] = {}
    deadline = time.monotonic() + timeout_s
    for p, start in starts.items():
        low, high = watermarks[p]
        first = low if start is None else max(start, low)
        if first < max(high, marks.get(p, high)):
            assign.append(TopicPartition(topic, p, first))
            tails[p] = _Tail(pos=first, end=high, deadline=deadline)
    found: dict[str, Written] = {}
    read = 0
    if not assign:
        return found, read
    reader = _Reader(consumer, topic, stable)
    consumer.assign(assign)
    try:
        while tails:
            _check_deadlines(topic, tails, timeout_s, component)
            for m in consumer.consume(_BATCH, timeout=0.2):
                err = m.error()
                tail = tails.get(m.partition() or 0)
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001
                        if tail is not None:
                            tail.at_end = True
                            tail.pos = max(tail.pos, m.offset() or 0)
                        continue
                    if is_fatal(err):
                        msg = (
                            f"{component}: reading back `{topic}:{m.partition()}` failed: "
                            f"{err.name()}; check the topic and the consumer settings"
                        )
                        raise SinkTerminalError(msg)
                    continue
                read += 1
                offset = m.offset()
                if offset is not None and tail is not None:
                    tail.pos = max(tail.pos, offset + 1)
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
            for p in [p for p, tail in tails.items() if _done(reader, p, tail, mine, component)]:
                del tails[p]
    finally:
        consumer.unassign()
        reader.close()
    return found, read


def _done(
    reader: _Reader, p: int, tail: _Tail, mine: Callable[[str], bool], component: str
) -> bool:
    """Whether the read-back of ``p`` is complete (see ``_sink_stable`` for the wait)."""
    if tail.until is None:
        if not (tail.at_end or tail.pos >= tail.end):
            return False
        stable = reader.stable
        mark = stable.marks.get(p) if stable is not None else None
        if stable is None or mark is None or tail.pos >= mark:
            return True
        # Stopped at the last stable offset below the mark: another producer's
        # transaction is open there. Wait only if this shard's records lie behind it.
        last = last_own_offset(
            reader.uncommitted(),
            reader.topic,
            p,
            tail.pos,
            mark,
            mine=mine,
            deadline=tail.deadline,
            component=component,
        )
        if last is None:
            return True
        tail.until = last + 1
        tail.deadline = max(tail.deadline, time.monotonic() + stable.wait_s)
        logger.warning(
            "%s: `%s:%s` has a transaction open at offset %s (another producer's, left by "
            "a run that stopped); this shard's records up to offset %s lie behind it: "
            "waiting for it to be aborted, by its shard's next start or by the broker "
            "after `transaction.timeout.ms`",
            component,
            reader.topic,
            p,
            tail.pos,
            last,
        )
        return False
    if tail.pos < tail.until:
        # Aborted records and transaction markers are skipped without a message.
        tail.pos = max(tail.pos, reader.position(p))
    return tail.pos >= tail.until


def _check_deadlines(topic: str, tails: dict[int, _Tail], timeout_s: float, component: str) -> None:
    now = time.monotonic()
    late = sorted(p for p, tail in tails.items() if now > tail.deadline)
    if not late:
        return
    for p in late:
        until = tails[p].until
        if until is None:
            continue
        msg = (
            f"{component}: reading back `{topic}:{p}` to reconcile: a transaction open at "
            f"offset {tails[p].pos} (another producer's, left by a run that stopped) hides "
            f"this shard's committed records up to offset {until - 1} from "
            f"read_committed and was not aborted in time; start the flow again (every "
            f"shard aborts its own open transaction when it starts, the broker one older "
            f"than `transaction.timeout.ms`), or abort it with the Kafka admin tools "
            f"(kafka-transactions.sh abort)"
        )
        raise SinkTransientError(msg)
    msg = (
        f"{component}: reading back `{topic}` partitions {late} to reconcile did not "
        f"finish within {timeout_s:g} s; check the brokers or raise `unreachable_timeout`"
    )
    raise SinkTransientError(msg)
