"""A base for bounded, deterministic, rate-limitable source partitions of generated data.

The embedded sample sources of the flows emit keyed batches for offsets
``[next_offset, end)`` in steps of ``batch_size``; subclasses only build a batch for a
range of offsets. Resume state is the next offset, as with Kafka.
"""

from __future__ import annotations

from abc import abstractmethod
from datetime import timedelta

import pyarrow as pa
from typing_extensions import override

from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime.paced_source import PacedPartition

__all__ = ["GeneratedPartition"]


class GeneratedPartition(PacedPartition[KeyedBatch, int]):
    """Emits ``build(start, stop)`` for consecutive offset ranges until ``end``.

    Args:
        key: The partition key of every emitted batch.
        next_offset: Where to start (the resume state).
        end: One past the last offset.
        batch_size: Offsets per batch.
        records_per_s: Optional rate limit, applied through ``next_awake``.
    """

    def __init__(
        self,
        key: str,
        *,
        next_offset: int,
        end: int,
        batch_size: int,
        records_per_s: float | None,
    ) -> None:
        self._key = key
        self._next_offset = next_offset
        self._end = end
        self._batch_size = batch_size
        self._rate = records_per_s

    @abstractmethod
    def build(self, start: int, stop: int) -> pa.RecordBatch:
        """The batch for offsets ``[start, stop)`` (it may also repeat earlier ones)."""

    @override
    def next_batch(self) -> list[KeyedBatch]:
        if self._next_offset >= self._end:
            raise StopIteration
        start, stop = self._next_offset, min(self._end, self._next_offset + self._batch_size)
        batch = self.build(start, stop)
        self._next_offset = stop
        if self._rate:
            self._wake_in(timedelta(seconds=batch.num_rows / self._rate))
        return [(self._key, batch)]

    @override
    def snapshot(self) -> int:
        return self._next_offset
