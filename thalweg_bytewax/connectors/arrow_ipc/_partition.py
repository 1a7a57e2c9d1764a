"""Private: the sink partition behind ``ArrowIPCSink``: staging, finalize, replay checks.

The epoch protocol (failed flag, ownership, ordering, replay skipping and record-id
checks, never publishing in ``close()``) is :class:`~thalweg_bytewax.runtime.epoch_sink.
EpochSinkPartition`'s; this module appends record batches to hidden staging files and
publishes them in ``commit_epoch()``. See :mod:`thalweg_bytewax.connectors.arrow_ipc`
for the guarantee and the layout.
"""

from __future__ import annotations

import contextlib
import logging
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
from typing_extensions import override

from thalweg_bytewax import _faults
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.records import RECORD_ID_BYTES
from thalweg_bytewax.runtime.epoch_sink import EpochSinkState

from .._epoch_partition import ConfiguredSinkPartition
from ..raw_lane._shards import LaneSinkStats, LaneStream, StagedFile, lane_io
from ..raw_lane._store import LaneStore, staging_prefix, topic_dir_name

if TYPE_CHECKING:
    from .config import ArrowIPCSinkConfig

__all__ = [
    "IPC_FINAL_NAME",
    "SUFFIXES",
    "ArrowIPCSinkStats",
    "ipc_final_name",
    "read_ipc_table",
]

logger = logging.getLogger(__name__)

SUFFIXES: Final = {"file": ".arrow", "stream": ".arrows"}
"""The file suffix of each IPC format: random-access file, or stream."""
IPC_FINAL_NAME: Final = re.compile(r"^(\d{20})-(\d{20})\.arrows?$")
"""Finalized file names: ``<first offset>-<last offset>.arrow`` (or ``.arrows``)."""

COMPONENT: Final = "arrow ipc sink"


def ipc_final_name(first: int, last: int, suffix: str) -> str:
    """The deterministic name of a finalized span of offsets, e.g. ``…0-…9.arrow``."""
    return f"{first:020d}-{last:020d}{suffix}"


def read_ipc_table(source: pa.NativeFile, columns: list[str] | None = None) -> pa.Table:
    """A whole IPC file or stream (told apart by its magic bytes) as a table."""
    try:
        reader: ipc.RecordBatchFileReader | ipc.RecordBatchStreamReader = ipc.open_file(source)
        batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        schema = reader.schema
    except pa.ArrowInvalid:
        source.seek(0)
        stream = ipc.open_stream(source)
        batches = list(stream)
        schema = stream.schema
    table = pa.Table.from_batches(batches, schema=schema)
    return table.select(columns) if columns is not None else table


class ArrowIPCSinkStats(LaneSinkStats):
    """Plain counters of one Arrow IPC sink partition (those of every lane sink)."""

    __slots__ = ()


@dataclass
class _Stream(LaneStream[ipc.RecordBatchFileWriter | ipc.RecordBatchStreamWriter]):
    """One source partition's directory and the file being written this epoch."""

    schema: pa.Schema | None = None
    rows: int = 0


class _ArrowIPCPartition(ConfiguredSinkPartition["ArrowIPCSinkConfig"]):
    replay_remedy: ClassVar[str] = "move the directory aside or write to a new path"
    merge_remedy: ClassVar[str] = "give each its own path (e.g. `ipc/decode`, `ipc/contract`)"

    def __init__(
        self,
        config: ArrowIPCSinkConfig,
        store: LaneStore,
        resume: EpochSinkState | None,
        shard: int,
    ) -> None:
        self.stats: ArrowIPCSinkStats = ArrowIPCSinkStats()
        super().__init__(COMPONENT, config, resume, shard, stats=self.stats)
        self._store = store
        self._suffix = config.suffix
        self._options = ipc.IpcWriteOptions(compression=config.ipc_compression)
        self._streams: dict[str, _Stream] = {}

    # -- hooks -------------------------------------------------------------------------

    @override
    def open_partition(self, key: str, topic: str, partition: int) -> OffsetCoverage:
        directory = self._store.join(topic_dir_name(topic), str(partition))
        with lane_io(self.component, self._store.root, "listing a partition directory"):
            self._store.ensure_dir(directory)
            files = sorted(
                (int(m.group(1)), int(m.group(2)), name)
                for name in self._store.list_names(directory)
                if (m := IPC_FINAL_NAME.match(name))
            )
        self._streams[key] = _Stream(directory, files)
        return OffsetCoverage((first, last) for first, last, _ in files)

    @override
    def stage(self, key: str, rows: pa.RecordBatch) -> None:
        with lane_io(self.component, self._store.root, "writing a staging file"):
            stream = self._streams[key]
            for first, last, part in self.pending_pieces(key, rows):
                current = stream.current
                if current is not None and not self.in_one_pending_span(
                    key, min(current.first, first), max(current.last, last)
                ):
                    # Offsets between the open file and these rows were never received
                    # here (refused on another shard): a name must not span them.
                    self._close_current(stream)
                self._append(stream, part)

    @override
    def commit_epoch(self) -> None:
        _faults.checkpoint("arrow_ipc.before_finalize")
        with lane_io(self.component, self._store.root, "finalizing the epoch's files"):
            self._finalize_all()

    @override
    def abort(self) -> None:
        for stream in self._streams.values():
            staged = [*stream.closed, *([stream.current] if stream.current else [])]
            with contextlib.suppress(Exception):
                self._close_writer(stream)
            for item in staged:
                self._store.delete(item.path)
            stream.closed.clear()

    @override
    def release(self) -> None:
        # close() never publishes: a clean finish snapshotted the last epoch already.
        for stream in self._streams.values():
            with contextlib.suppress(Exception):
                self._close_writer(stream)

    @override
    def held_record_ids(self, key: str, first: int, last: int) -> pa.Table | None:
        stream = self._streams[key]
        off, rid = self.columns.source_offset, self.columns.record_id
        tables = []
        with lane_io(self.component, self._store.root, "reading finalized files back"):
            for lo, hi, name in stream.files:
                if hi < first or lo > last:
                    continue
                path = self._store.child(stream.directory, name)
                with self._store.fs.open_input_file(path) as f:
                    table = read_ipc_table(f)
                if off not in table.schema.names:
                    return None
                if rid not in table.schema.names:  # checked by offset only
                    table = table.append_column(
                        rid, pa.nulls(table.num_rows, pa.binary(RECORD_ID_BYTES))
                    )
                table = table.select([off, rid])
                offsets = table.column(off)
                keep = pc.and_(pc.greater_equal(offsets, first), pc.less_equal(offsets, last))
                tables.append(table.filter(keep))
        return pa.concat_tables(tables) if tables else None

    @override
    def describe_target(self, key: str) -> str:
        return f"directory `{self._streams[key].directory}`"

    # -- staging -----------------------------------------------------------------------

    def _append(self, stream: _Stream, batch: pa.RecordBatch) -> None:
        bounds = pc.min_max(batch.column(self.columns.source_offset))
        first, last = bounds["min"].as_py(), bounds["max"].as_py()
        if stream.writer is not None and not batch.schema.equals(stream.schema):
            self._close_current(stream)  # one file, one schema: a change starts a new file
        if stream.writer is None:
            name = f"{staging_prefix(self.shard)}{uuid.uuid4().hex}{self._suffix}"
            path = self._store.child(stream.directory, name)
            stream.sink_file = self._store.open_output(path)
            new = ipc.new_file if self._config.format == "file" else ipc.new_stream
            stream.writer = new(stream.sink_file, batch.schema, options=self._options)
            stream.schema = batch.schema
            stream.current = StagedFile(path, first, last)
            stream.rows = 0
        assert stream.current is not None
        stream.writer.write_batch(batch)
        stream.current.widen(first, last)
        stream.rows += batch.num_rows
        if stream.rows >= self._config.max_file_rows:
            self._close_current(stream)

    def _close_writer(self, stream: _Stream) -> None:
        writer, sink_file = stream.writer, stream.sink_file
        stream.writer = None
        stream.sink_file = None
        stream.schema = None
        try:
            if writer is not None:
                writer.close()  # writes the file footer (or the stream's end marker)
        finally:
            if sink_file is not None:
                sink_file.close()

    def _close_current(self, stream: _Stream) -> None:
        if stream.writer is None:
            return
        self._close_writer(stream)
        assert stream.current is not None
        stream.closed.append(stream.current)
        stream.current = None

    # -- the durable wait --------------------------------------------------------------

    def _finalize_all(self) -> None:
        touched: set[str] = set()
        for stream in self._streams.values():
            self._close_current(stream)
            for staged in stream.closed:
                final = self._store.child(
                    stream.directory, ipc_final_name(staged.first, staged.last, self._suffix)
                )
                self._store.finalize(staged.path, final)  # fsync, then link: never overwrites
                self.stats.files_finalized += 1
                touched.add(stream.directory)
            stream.closed.clear()
        for directory in touched:
            self._store.sync_dir(directory)
        if touched:
            _faults.checkpoint("arrow_ipc.after_finalize")
