"""Private: where one Kafka source partition's read stands, and when it reads next.

:class:`ReadProgress` keeps the bookkeeping of a partition between polls: the offset
after the last record emitted and that record's leader epoch (what a snapshot holds),
the end offset of a bounded read, how many records the next poll may ask for (the batch
size, shrunk to ``max_batch_bytes`` by the records' mean size), and when the partition
wants to be woken (backoff after an empty poll or a transient error, the rate limit).
The partition itself only does the I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pyarrow as pa

from thalweg_bytewax.runtime import admission

from ._backoff import ERROR_BACKOFF, IDLE_BACKOFF, Backoff
from ._partition_health import ClientHealth
from .stats import KafkaSourceStats

__all__ = ["ReadProgress"]


class ReadProgress:
    """One partition's position, end, batch budget and next wake-up.

    Args:
        key: The partition's key (``topic:partition``), as the admission ledger knows it.
        flow: The flow the admission ledger paces.
        stats: The partition's counters.
        health: What the partition's client reported.
        start: The first offset to read.
        end_offset: Where a bounded read ends (None: it tails).
        leader_epoch: The leader epoch of the record before ``start``, if known.
        batch_size: The most records one poll asks for.
        max_bytes: The most bytes one batch should hold.
        rate: The most records per second (None: unpaced).
    """

    def __init__(  # noqa: PLR0913 - the settings a partition reads by
        self,
        key: str,
        flow: str,
        stats: KafkaSourceStats,
        health: ClientHealth,
        *,
        start: int,
        end_offset: int | None,
        leader_epoch: int | None,
        batch_size: int,
        max_bytes: int,
        rate: float | None,
    ) -> None:
        self._key, self._flow = key, flow
        self._stats, self._health = stats, health
        self.next_offset = start
        """The offset after the last record emitted: where a resume starts."""
        self.leader_epoch = leader_epoch
        """The leader epoch of the last record emitted."""
        self.end_offset = end_offset
        self.eof = end_offset is not None and start >= end_offset
        """Whether a bounded read reached its end."""
        self.next_awake: datetime | None = None
        self._batch_size, self._max_bytes, self._rate = batch_size, max_bytes, rate
        self._avg_record_bytes = 0.0
        self._idle = Backoff(IDLE_BACKOFF)
        self._errors = Backoff(ERROR_BACKOFF)

    def budget(self) -> int:
        """How many records the next poll asks for."""
        if self._avg_record_bytes <= 0:
            return self._batch_size
        return max(1, min(self._batch_size, int(self._max_bytes / self._avg_record_bytes)))

    def pace(
        self, now: datetime, *, transient: bool, got: bool, position: Callable[[], int]
    ) -> bool:
        """Set the next wake-up; whether there are records (else StopIteration at the end).

        Args:
            now: When the poll returned.
            transient: Whether it met a transient error.
            got: Whether it returned records.
            position: The client's position (asked only after an empty poll of a
                bounded read).
        """
        if got:
            self._health.received()
        if transient:
            self.next_awake = now + self._errors.next()
        elif not got:
            self.next_awake = now + self._idle.next()
        else:
            self._errors.reset()
            self._idle.reset()
            self.next_awake = None
            self._health.recovered()
        if not got:
            if self.end_offset is not None and position() >= self.end_offset:
                self.eof = True
                raise StopIteration
            self._health.raise_if_unreachable_too_long(self.next_offset, self.end_offset)
            return False
        return True

    def emitted(
        self, batch: pa.RecordBatch, last_offset: int, leader_epoch: int | None, now: datetime
    ) -> None:
        """Count a batch emitted up to ``last_offset`` and move the position past it."""
        stats = self._stats
        # Offsets without a record: aborted transactions, markers, compacted records.
        stats.offsets_skipped += last_offset + 1 - self.next_offset - batch.num_rows
        self.next_offset = last_offset + 1
        self.leader_epoch = leader_epoch
        size = batch.nbytes
        self._avg_record_bytes = size / batch.num_rows
        stats.records += batch.num_rows
        stats.bytes += size
        stats.batches += 1
        if self.end_offset is not None and self.next_offset >= self.end_offset:
            self.eof = True
        if self._rate is not None:
            self.next_awake = now + timedelta(seconds=batch.num_rows / self._rate)
        admission.ledger().emitted(self._flow, self._key, last_offset, size)
