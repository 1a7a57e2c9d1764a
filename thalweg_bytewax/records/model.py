"""The record model: a source record's place (``Locator``) and the record-at-a-time form.

``RawRecord`` is one row of a RawBatch as a Python object (for record-at-a-time code and
tests); :mod:`thalweg_bytewax.records.batches` turns them into a RawBatch and back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum

import pyarrow as pa

from thalweg_bytewax.records.ids import record_id

__all__ = ["Header", "KeyedBatch", "Locator", "OffsetSpan", "RawRecord", "TimestampType"]

Header = tuple[str, bytes | None]
"""One Kafka header: a name and a value that may be null."""

KeyedBatch = tuple[str, pa.RecordBatch]
"""One item of a keyed batch stream: a batch keyed by its source partition (``"orders:3"``).

Every source emits these and every operator maps them to more of them (ARCHITECTURE §2).
"""


class TimestampType(StrEnum):
    """The type of a record timestamp, as the broker reports it."""

    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"
    NOT_AVAILABLE = "NotAvailable"


@dataclass(frozen=True, slots=True)
class Locator:
    """Where a record came from: cluster, topic, partition, offset and leader epoch."""

    topic: str
    partition: int
    offset: int
    cluster: str | None = None
    leader_epoch: int | None = None

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}@{self.offset}"


@dataclass(frozen=True, slots=True)
class OffsetSpan:
    """An inclusive range of offsets of one topic-partition."""

    topic: str
    partition: int
    first: int
    last: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}[{self.first}..{self.last}]"


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One source record with nothing lost: the record-at-a-time form of a RawBatch row.

    ``key``/``value`` are ``None`` when absent, which is distinct from ``b""``; a
    ``None`` value is a tombstone. ``headers`` is an ordered tuple that keeps duplicate
    names and null values.
    """

    locator: Locator
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp_ms: int | None = None
    timestamp_type: TimestampType = TimestampType.NOT_AVAILABLE
    producer_id: int | None = None
    producer_epoch: int | None = None
    base_sequence: int | None = None
    ingest_ts: datetime = field(default_factory=lambda: datetime.now(UTC))
    record_id: bytes = b""

    def with_record_id(self) -> RawRecord:
        """Return a copy whose ``record_id`` is computed from its locator and value."""
        loc = self.locator
        rid = record_id(loc.cluster, loc.topic, loc.partition, loc.offset, self.value)
        return replace(self, record_id=rid)
