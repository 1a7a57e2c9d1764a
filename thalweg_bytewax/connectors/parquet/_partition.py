"""Private: the sink partition behind ``ParquetSink`` — staging, background writes, finalize.

The epoch protocol (failed flag, ownership, ordering, replay skipping and record-id
checks, never publishing in ``close()``) is :class:`~thalweg_bytewax.runtime.epoch_sink.
EpochSinkPartition`'s; this module stages row groups in hidden files and finalizes them
in ``commit_epoch()``. See :mod:`thalweg_bytewax.connectors.parquet` for the guarantee
and the layout.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from typing_extensions import override

from thalweg_bytewax import _faults
from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.runtime.epoch_sink import EpochSinkState, buffered_size

from .._epoch_partition import ConfiguredSinkPartition
from ..raw_lane._shards import StagedFile, lane_io
from ..raw_lane._store import (
    FINAL_NAME,
    STAGING_PREFIX,
    LaneStore,
    final_name,
    staging_prefix,
    topic_dir_name,
)
from ._budget import flush_siblings, keep_within_budget, siblings
from ._encoding import column_options
from ._readback import held_record_ids
from ._schema import LaneSchema
from ._stream import ParquetSinkStats, TopicPartitionStream, close_writer
from ._writes import WriteQueue

if TYPE_CHECKING:
    from .config import ParquetSinkConfig

__all__ = ["ParquetSinkStats"]

logger = logging.getLogger(__name__)


class _ParquetPartition(ConfiguredSinkPartition["ParquetSinkConfig"]):
    replay_remedy: ClassVar[str] = "move the lane aside or write to a new path"
    merge_remedy: ClassVar[str] = (
        "give each its own path (e.g. `dlq/decode`, `dlq/contract`); they read back as one dataset"
    )
    readiness_critical: ClassVar[bool] = True  # the raw lane: if raw cannot land, not ready

    def __init__(
        self,
        config: ParquetSinkConfig,
        store: LaneStore,
        resume: EpochSinkState | None,
        shard: int,
    ) -> None:
        self.stats: ParquetSinkStats = ParquetSinkStats()
        super().__init__("parquet sink", config, resume, shard, stats=self.stats)
        self._store = store
        self._streams: dict[str, TopicPartitionStream] = {}
        # Batches are staged in the lane's schema, evolved or refused before any row
        # of them is staged; a change is recorded at the commit, before finalizing.
        self._schema = LaneSchema(store, allow_widening=config.allow_widening)
        # Row groups are written on background threads, in order per file, a few in
        # flight; commit_epoch() drains all of them before anything becomes visible.
        self._writes = WriteQueue()
        self._buffered = 0  # bytes in the buffers of all this partition's streams
        siblings().add(self)

    # -- hooks of the epoch protocol -------------------------------------------------

    @override
    def open_partition(self, key: str, topic: str, partition: int) -> OffsetCoverage:
        directory = self._store.join(topic_dir_name(topic), str(partition))
        with lane_io(self.component, self._store.root, "opening the partition directory"):
            self._store.ensure_dir(directory)
            names = self._store.list_names(directory)
        files: list[tuple[int, int, str]] = []
        for name in names:
            m = FINAL_NAME.match(name)
            if m:
                files.append((int(m.group(1)), int(m.group(2)), name))
            elif name.startswith(STAGING_PREFIX):
                # A staging file of a run that died before its epoch's snapshot: never
                # visible, and its rows are replayed from the source position.
                with lane_io(self.component, self._store.root, "removing a stale staging file"):
                    self._store.delete(self._store.child(directory, name))
        self._streams[key] = TopicPartitionStream(directory, files)
        return OffsetCoverage((first, last) for first, last, _ in files)

    @override
    def stage(self, key: str, rows: pa.RecordBatch) -> None:
        with lane_io(self.component, self._store.root, "reading the lane's schema"):
            rows = self._schema.conform(rows)
        with lane_io(self.component, self._store.root, "writing a staging file"):
            stream = self._streams[key]
            for lo, hi, part in self.pending_pieces(key, rows):
                self._start_file_if_apart(stream, key, lo, hi)
                self._append(stream, key, part, lo, hi)

    @override
    def commit_epoch(self) -> None:
        _faults.checkpoint("parquet.before_finalize")
        with lane_io(self.component, self._store.root, "recording the lane's schema"):
            self._schema.record()
        with lane_io(self.component, self._store.root, "finalizing the epoch's files"):
            self._finalize_all()

    @override
    def abort(self) -> None:
        # Buffered rows of a failed epoch are never written; staging files already
        # handed to the writers are never finalized and are removed on resume.
        for stream in self._streams.values():
            stream.buffer.clear()
            stream.buffer_rows = 0
            stream.buffer_bytes = 0
            stream.open_span = None
        self._buffered = 0

    @override
    def release(self) -> None:
        # Every writer thread's job is awaited, failed or not, before this returns: a
        # full disk fails all of them, and one left pending would raise again later.
        with lane_io(self.component, self._store.root, "closing the staging files"):
            self._writes.drain()

    @override
    def held_record_ids(self, key: str, first: int, last: int) -> pa.Table | None:
        return held_record_ids(self._store, self._streams[key], self.columns, first, last)

    @override
    def describe_target(self, key: str) -> str:
        return f"lane `{self._streams[key].directory}`"

    # -- staging ---------------------------------------------------------------------

    def _start_file_if_apart(
        self, stream: TopicPartitionStream, key: str, first: int, last: int
    ) -> None:
        """Close the open file unless it and ``first..last`` lie in one pending span.

        A file is named ``<first>-<last>`` for the offsets between its first and last
        row. Where the epoch's pending coverage has a hole between them (offsets this
        shard never received: a batch refused on another shard), one file would be
        named for offsets it does not hold, and a resume would skip them as written.
        """
        if stream.open_span is None:
            return
        lo, hi = min(stream.open_span[0], first), max(stream.open_span[1], last)
        if not self.in_one_pending_span(key, lo, hi):
            self._flush_buffer(stream, key)
            self._close_current(stream)

    def _append(
        self, stream: TopicPartitionStream, key: str, batch: pa.RecordBatch, first: int, last: int
    ) -> None:
        if stream.buffer and stream.buffer[0].schema != batch.schema:
            # The lane's schema evolved (LaneSchema): a new file, one file, one schema.
            self._flush_buffer(stream, key)
            self._close_current(stream)
        held = stream.open_span
        stream.open_span = (
            (first, last) if held is None else (min(held[0], first), max(held[1], last))
        )
        stream.buffer.append(batch)
        stream.buffer_rows += batch.num_rows
        size = buffered_size(batch)
        stream.buffer_bytes += size
        self._buffered += size
        if (
            stream.buffer_rows >= self._config.row_group_rows
            or stream.buffer_bytes >= self._config.row_group_bytes
        ):
            self._flush_buffer(stream, key)
        else:
            keep_within_budget(self)

    @property
    def buffered_bytes(self) -> int:
        """Bytes in the buffers of all this partition's topic-partitions."""
        return self._buffered

    @property
    def largest_buffer(self) -> int:
        """Bytes in the largest buffer of this partition's topic-partitions."""
        return max((s.buffer_bytes for s in self._streams.values()), default=0)

    def flush_largest(self) -> int:
        """Hand the largest buffer to the writer threads; the bytes it held."""
        if not self._streams:
            return 0
        key, stream = max(self._streams.items(), key=lambda item: item[1].buffer_bytes)
        held = stream.buffer_bytes
        self._flush_buffer(stream, key)
        return held

    def _flush_buffer(self, stream: TopicPartitionStream, key: str) -> None:
        if not stream.buffer:
            return
        table = pa.Table.from_batches(stream.buffer)
        stream.buffer.clear()
        stream.buffer_rows = 0
        self._buffered -= stream.buffer_bytes
        stream.buffer_bytes = 0
        offsets = table.column(self.columns.source_offset)
        bounds = pc.min_max(offsets)
        first, last = bounds["min"].as_py(), bounds["max"].as_py()
        if stream.writer is not None and stream.writer.schema != table.schema:
            self._close_current(stream)
        if stream.writer is None:
            path = self._store.child(
                stream.directory, f"{staging_prefix(self.shard)}{uuid.uuid4().hex}.parquet"
            )
            stream.sink_file = self._store.open_output(path)
            stream.writer = pq.ParquetWriter(
                stream.sink_file,
                table.schema,
                compression=self._config.compression,
                **column_options(table, self.columns),
            )
            stream.current = StagedFile(path, first, last)
            stream.current_rows = 0
        assert stream.current is not None
        self._writes.submit(
            stream, stream.writer.write_table, table, row_group_size=max(table.num_rows, 1)
        )
        stream.current.widen(first, last)
        stream.current_rows += table.num_rows
        if stream.current_rows >= self._config.max_file_rows:
            self._close_current(stream)

    def _close_current(self, stream: TopicPartitionStream) -> None:
        stream.open_span = None
        if stream.writer is None:
            return
        assert stream.current is not None
        # Closed and fsynced on a writer thread: the files of an epoch reach the disk in
        # parallel (a file closed mid-epoch, while the flow still polls) instead of one
        # after another in the snapshot, which then only links them under their names.
        self._writes.submit(
            stream,
            close_writer,
            stream.writer,
            stream.sink_file,
            self._store,
            stream.current,
            stream.current_rows,
            self.columns.source_offset,
        )
        stream.closed.append(stream.current)
        stream.writer = None
        stream.sink_file = None
        stream.current = None

    def flush_buffers(self) -> None:
        """Hand every buffered row group to the writer threads (no durability implied)."""
        if self.failed:
            return
        for key, stream in self._streams.items():
            self._flush_buffer(stream, key)

    # -- the durable wait ------------------------------------------------------------

    def _finalize_all(self) -> None:
        flush_siblings(self)  # the worker's other partitions encode meanwhile
        touched: set[str] = set()
        for key, stream in self._streams.items():
            self._flush_buffer(stream, key)
            self._close_current(stream)
        self._writes.drain()
        for stream in self._streams.values():
            stream.last_write = None
            for staged in stream.closed:
                final = self._store.child(stream.directory, final_name(staged.first, staged.last))
                self._store.finalize(staged.path, final, synced=True)
                self.stats.files_finalized += 1
                touched.add(stream.directory)
            stream.closed.clear()
        # The directories' fsyncs in parallel too (each waits on the disk, not the CPU).
        self._writes.each(self._store.sync_dir, sorted(touched))
        if touched:
            _faults.checkpoint("parquet.after_finalize")
