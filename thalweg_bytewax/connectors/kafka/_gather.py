"""Private: the records a Kafka source partition gathers over polls into one batch.

A record waiting in librdkafka's prefetch queue costs it ~470 bytes (an operation per
message and its share of the decompressed record batch) where the same record in a
RawBatch costs its bytes and ~40 bytes of columns. So a partition keeps librdkafka's
queue small (``_config``) and gathers what its polls return here, as RawBatches, until
a batch is full, instead of waiting for one queue to hold a whole batch: batches stay as
large as before (the work a record downstream is per batch), the prefetch's memory
shrinks.

Gathered records are not emitted, so the partition's snapshot stays at the first of
them: a resume reads them again. A partition holds them only while more are at hand
(:func:`keep_gathering`), so a partition at the end of its log emits at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Generic, TypeAlias, TypeVar, cast

import numpy as np
import pyarrow as pa

from thalweg_bytewax.records.kafka_batches import raw_batch_from_messages, raw_batch_from_native
from thalweg_bytewax.records.kafka_concat import NativeColumns, concat_native, concat_raw_batches

if TYPE_CHECKING:
    from confluent_kafka import Message

    from thalweg_bytewax.records.metadata import MetadataColumns

__all__ = [
    "Gathered",
    "PolledPiece",
    "gather_messages",
    "gather_native",
    "keep_gathering",
    "take_batch",
]

Piece = TypeVar("Piece")


class Gathered(Generic[Piece]):
    """What one partition's polls read but it has not emitted yet, oldest first.

    A piece is what one poll returned: the native consume's columns, or a RawBatch on
    the confluent-kafka path; the partition builds one batch of them when it emits.
    """

    def __init__(self) -> None:
        self._pieces: list[Piece] = []
        self.rows = 0
        """Records held."""
        self.bytes = 0
        """Bytes held (as the poll measures them: keys and values, or the batch's)."""
        self.last_offset = -1
        """The offset of the newest record held (-1: none)."""
        self.leader_epoch: int | None = None
        """The leader epoch of the newest record held, where the poll told it."""
        self.first_read: datetime | None = None
        """When the oldest piece held was read (``None``: none held)."""

    def __bool__(self) -> bool:
        return self.rows > 0

    def add(
        self,
        piece: Piece,
        *,
        rows: int,
        size: int,
        last_offset: int,
        read_at: datetime,
        leader_epoch: int | None = None,
    ) -> None:
        """Hold ``piece`` of ``rows`` records and ``size`` bytes, newest at ``last_offset``."""
        self._pieces.append(piece)
        self.rows += rows
        self.bytes += size
        self.last_offset = last_offset
        self.leader_epoch = leader_epoch
        if self.first_read is None:
            self.first_read = read_at

    def take(self) -> list[Piece]:
        """The pieces held, oldest first; none held after."""
        pieces, self._pieces = self._pieces, []
        self.rows = self.bytes = 0
        self.first_read = None
        return pieces


def keep_gathering(
    gathered: Gathered[Piece],
    *,
    polled: int,
    max_records: int,
    max_bytes: int,
    high_watermark: int,
    end_offset: int | None,
) -> bool:
    """Whether a partition holds its gathered records for another poll instead of emitting.

    Only while the last poll brought records (a poll that finds the queue empty emits
    what is held: nothing more is at hand), the batch is not full, and the log holds
    records past the newest gathered one (by the high watermark librdkafka last saw;
    unknown counts as none, and a bounded run's end offset as the log's end).

    Args:
        gathered: The partition's held records.
        polled: Records the last poll returned.
        max_records: Records per emitted batch at most.
        max_bytes: Bytes per emitted batch at most.
        high_watermark: The partition's high watermark as last seen (negative: unknown).
        end_offset: The offset a bounded run stops at (``None``: it follows the log).
    """
    if polled <= 0 or not gathered:
        return False
    if gathered.rows >= max_records or gathered.bytes >= max_bytes:
        return False
    following = gathered.last_offset + 1
    if end_offset is not None and following >= end_offset:
        return False
    return following < high_watermark


PolledPiece: TypeAlias = NativeColumns | pa.RecordBatch
"""What one poll of a partition returns: the native consume's columns or a RawBatch."""


def gather_messages(
    gathered: Gathered[PolledPiece],
    messages: Sequence[Message],
    *,
    cluster: str | None,
    columns: MetadataColumns,
    read_at: datetime,
) -> None:
    """Hold the records of confluent-kafka ``messages`` (errors filtered out) as a RawBatch."""
    if not messages:
        return
    batch = raw_batch_from_messages(messages, cluster=cluster, columns=columns, ingest_ts=read_at)
    last = messages[-1]
    gathered.add(
        batch,
        rows=batch.num_rows,
        size=batch.nbytes,
        last_offset=int(last.offset() or 0),
        leader_epoch=last.leader_epoch(),
        read_at=read_at,
    )


def gather_native(
    gathered: Gathered[PolledPiece], out: NativeColumns, *, read_at: datetime
) -> None:
    """Hold what one native consume returned (``out[0]`` records; none: nothing held)."""
    n = out[0]
    if n <= 0:
        return
    gathered.add(
        out,
        rows=n,
        size=len(out[8]) + len(out[11]),  # keys and values, as consume() counts
        last_offset=int(np.frombuffer(out[1], np.int64, count=n)[-1]),
        read_at=read_at,
    )


def take_batch(
    gathered: Gathered[PolledPiece],
    *,
    native: bool,
    topic: str,
    partition: int,
    cluster: str | None,
    columns: MetadataColumns,
    now: datetime,
) -> tuple[pa.RecordBatch, int, int | None]:
    """The held records as one RawBatch, its last offset and leader epoch; none held after.

    Args:
        gathered: The partition's held records (at least one).
        native: Whether the pieces are native consume columns (else RawBatches).
        topic: The partition's topic.
        partition: The partition's number.
        cluster: The cluster id to stamp.
        columns: Metadata column names.
        now: The read time when none was recorded.
    """
    read_at = gathered.first_read or now
    last, epoch = gathered.last_offset, gathered.leader_epoch
    pieces = gathered.take()
    if not native:
        return concat_raw_batches(cast("list[pa.RecordBatch]", pieces)), last, epoch
    batch = raw_batch_from_native(
        concat_native(cast("list[NativeColumns]", pieces)),
        topic=topic,
        partition=partition,
        cluster=cluster,
        columns=columns,
        ingest_ts=read_at,
    )
    return batch, last, batch.column(columns.source_leader_epoch)[-1].as_py()
