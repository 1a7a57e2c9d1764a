"""Arrow IPC out and in: a directory of ``.arrow`` files, exactly once, read back without decoding.

Layout under the sink's path, as the Parquet raw lane's::

    <path>/<topic>/<partition>/<first offset>-<last offset>.arrow     (IPC file format)
    <path>/<topic>/<partition>/<first offset>-<last offset>.arrows    (format="stream")

:class:`ArrowIPCSink` is an epoch sink
(:class:`~thalweg_bytewax.runtime.epoch_sink.EpochSinkPartition`): within an epoch each
source partition's batches are appended to a hidden staging file (``.staging-*``, which
readers skip); when Bytewax snapshots the epoch every staging file is closed (the IPC
footer written), fsynced and hard-linked under its deterministic final name (a final
file is never overwritten), and the directory is fsynced, before the snapshot returns.
On resume the finalized names of each source partition give the offsets already held,
and replayed rows are skipped (the first ones checked by record id).

:class:`ArrowIPCSource` reads such a directory back, one partition per directory
(one source partition: its files in offset order), so another flow or process
consumes the batches in the order they were written: local files are memory-mapped,
and a batch is a view of the file's pages, with nothing decoded. Rows keep the
locator columns the sink wrote and are keyed by their source partition
(``"orders:3"``), so an epoch sink downstream owns, orders and skips replays as it
would behind the original source.

Why not ``FileSource``, which also reads IPC files? ``FileSource`` treats a file as a
new origin: its rows get the path as topic and the row index as offset (and a new
record id), and its state is a row index. ``ArrowIPCSource`` is the lane-aware reader:
it keeps the rows' own locator and record id, its state is the file being read and its
next batch index (a resume seeks straight to it in the file format), and it can follow
a directory.
"""

from __future__ import annotations

import logging
import os
import threading

import pyarrow as pa
import pyarrow.fs as pafs
from bytewax.inputs import FixedPartitionedSource
from typing_extensions import override

from thalweg_bytewax._redact import redact_url
from thalweg_bytewax.coverage.store import CoverageStore
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime.epoch_sink import EpochSinkState
from thalweg_bytewax.runtime.parts import announce_listing, decode_part, encode_part
from thalweg_bytewax.runtime.sharded_sink import ShardedEpochSink, coverage_store_option

from .._lane_sink import LaneShards
from ._partition import SUFFIXES, ArrowIPCSinkStats, _ArrowIPCPartition
from ._source_partition import (
    FileWatch,
    IPCDirectoryPartition,
    IPCFiles,
    by_directory,
    split_glob,
)

__all__ = ["ArrowIPCSink", "ArrowIPCSinkStats", "ArrowIPCSource"]

logger = logging.getLogger(__name__)

# A file is closed after this many rows (it still becomes visible only at the epoch's
# snapshot): bounds what a reader maps per file on a long epoch, as the Parquet lane's.
DEFAULT_MAX_FILE_ROWS = 4 * 1024 * 1024
_COMPRESSION = {"none": None, "lz4": "lz4", "zstd": "zstd"}
# How often a following source re-lists its directory: a listing is one directory walk.
DEFAULT_FOLLOW_INTERVAL_S = 5.0


def _positive_int(component: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = f"{component}: `{name}` expected an integer >= 1; got {value!r}"
        raise ConfigError(msg)
    return value


def _check_filesystem(component: str, filesystem: object) -> None:
    if filesystem is not None and not isinstance(filesystem, pafs.FileSystem):
        msg = (
            f"{component}: `filesystem` expected a `pyarrow.fs.FileSystem` or None; got "
            f"{type(filesystem).__name__} (wrap an fsspec file system in "
            f"`pyarrow.fs.PyFileSystem(pyarrow.fs.FSSpecHandler(fs))`)"
        )
        raise ConfigError(msg)


class ArrowIPCSink(ShardedEpochSink[_ArrowIPCPartition]):
    """Write keyed batches with locator columns as a directory of Arrow IPC files.

    Source topic-partitions are the unit of parallelism: each gets its own file per
    epoch. Exactly-once: files are finalized (fsync + atomic link under a name that is
    never overwritten) when Bytewax snapshots the epoch, names are deterministic from
    (topic, partition, first offset, last offset), and replayed rows that finalized
    files already cover are skipped. Each row gets ``_twg_emit_ts``. Another process
    reads the finished files with ``pyarrow.ipc.open_file(pyarrow.memory_map(path))``,
    or a flow with :class:`ArrowIPCSource`. One file holds one schema: a batch with
    another schema starts a new file.

    Example::

        flow = Dataflow("to_ipc")
        raw = op.input("in", flow, KafkaSource(["localhost:9092"], ["orders"]))
        op.output("ipc", raw, ArrowIPCSink("lake/ipc"))

    Args:
        path: A local directory, a URI (``file://``, ``s3://``, …) or, with
            ``filesystem``, a path on that file system.
        filesystem: A ``pyarrow.fs.FileSystem`` (wrap fsspec file systems in
            ``pyarrow.fs.PyFileSystem(pyarrow.fs.FSSpecHandler(fs))``).
        shards: Number of sink partitions the topic-partitions are spread over. Keep it
            fixed for a directory.
        format: ``"file"`` (IPC file format, ``.arrow``: random access, readers can
            memory-map it) or ``"stream"`` (IPC stream format, ``.arrows``).
        compression: ``"none"`` (default: a memory-mapped read copies nothing),
            ``"lz4"`` or ``"zstd"`` (smaller files; a reader decompresses each batch).
        max_file_rows: Rows after which a file is closed within an epoch.
        metadata_prefix: Prefix of the metadata columns.
        coverage_store: Where to record each committed epoch's coverage, under the
            output's step id (as ``ParquetSink``'s). None records nothing.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        filesystem: pafs.FileSystem | None = None,
        shards: int = 16,
        format: str = "file",  # noqa: A002 - the documented name, as FileSource's
        compression: str | None = "none",
        max_file_rows: int = DEFAULT_MAX_FILE_ROWS,
        metadata_prefix: str = DEFAULT_PREFIX,
        coverage_store: CoverageStore | str | os.PathLike[str] | None = None,
    ) -> None:
        where = "arrow ipc sink"
        if not isinstance(path, str | os.PathLike) or not os.fspath(path):
            msg = (
                f"{where}: `path` expected a non-empty directory, URI or path on "
                f"`filesystem`; got {path!r}"
            )
            raise ConfigError(msg)
        _check_filesystem(where, filesystem)
        if format not in SUFFIXES:
            msg = (
                f"{where}: `format` expected 'file' (.arrow, random access) or 'stream' "
                f"(.arrows); got {format!r}"
            )
            raise ConfigError(msg)
        key = "none" if compression is None else compression
        if not isinstance(key, str) or key.lower() not in _COMPRESSION:
            msg = f"{where}: `compression` expected 'none', 'lz4' or 'zstd'; got {compression!r}"
            raise ConfigError(msg)
        if not isinstance(metadata_prefix, str):
            msg = f"{where}: `metadata_prefix` expected a string; got {metadata_prefix!r}"
            raise ConfigError(msg)
        self.path = os.fspath(path)
        self.filesystem = filesystem
        self.shards = _positive_int(where, "shards", shards)
        self.format = format
        self.compression = _COMPRESSION[key.lower()]
        self.max_file_rows = _positive_int(where, "max_file_rows", max_file_rows)
        self.columns = MetadataColumns(metadata_prefix)
        self.coverage_store = coverage_store_option(coverage_store)
        self._lane = LaneShards(self.path, filesystem, where, logger)

    @override
    def list_parts(self) -> list[str]:
        self._lane.store()  # a bad path fails at build time, before data moves
        return super().list_parts()

    @override
    def build_shard(
        self, step_id: str, shard: int, resume_state: EpochSinkState | None
    ) -> _ArrowIPCPartition:
        store = self._lane.prepare(step_id, shard)
        return _ArrowIPCPartition(self, store, resume_state, shard)


class ArrowIPCSource(FixedPartitionedSource[KeyedBatch, tuple[str, int]]):
    """Read a directory of Arrow IPC files (an ``ArrowIPCSink``'s) as keyed batches.

    Directories are the unit of parallelism: one partition per directory holding
    files, keyed ``"<directory>:0"`` — under an ``ArrowIPCSink`` that is one source
    partition (``<path>/<topic>/<partition>/``), whose files a partition reads one after
    the other in offset order (files named ``<first>-<last>.arrow`` by their offsets,
    any other file after them by name). A source partition that spans many files (a run
    of many epochs) therefore reaches the next sink in offset order, as it was written.
    The state is the file being read and the index of its next record batch, so a
    resumed run starts at the batch after its last completed epoch. Exactly-once with an
    epoch sink downstream: batches keep the rows' locator columns and are keyed by
    their source partition (``"orders:3"``), so the sink skips what it already holds.
    Rows without locator columns are keyed by their directory. Local files are
    memory-mapped (nothing is copied or decoded unless the files are compressed).

    State kept by versions that read one partition per file does not resume here:
    Bytewax refuses it before the flow starts, and ``thalweg recovery check`` names
    the step and the remedy (a fresh recovery directory; an epoch sink downstream skips
    the rows it already holds).

    Example::

        flow = Dataflow("from_ipc")
        batches = op.input("in", flow, ArrowIPCSource("lake/ipc"))
        op.output("lane", batches, ParquetSink("lake/raw"))

    Args:
        path: A directory (its ``.arrow`` and ``.arrows`` files, recursively), a glob
            (``lake/ipc/orders/*/*.arrow``; ``**`` spans directories) or one file;
            local, a URI, or a path on ``filesystem``. Names starting with ``.`` or
            ``_`` (staging files) are skipped. Listed once, when the flow starts.
        filesystem: A ``pyarrow.fs.FileSystem`` for ``path``.
        follow: Keep the flow running after the files are read and re-list the
            directory every ``follow_interval_s``: files finalized since the start are
            logged once and are read when the flow restarts (Bytewax lists partitions
            once). False ends each partition at the end of its directory's last file.
        follow_interval_s: Seconds between listings when following.
        metadata_prefix: Prefix of the metadata columns.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        filesystem: pafs.FileSystem | None = None,
        follow: bool = False,
        follow_interval_s: float = DEFAULT_FOLLOW_INTERVAL_S,
        metadata_prefix: str = DEFAULT_PREFIX,
    ) -> None:
        where = "arrow ipc source"
        if not isinstance(path, str | os.PathLike) or not os.fspath(path):
            msg = f"{where}: `path` expected a directory, glob or file; got {path!r}"
            raise ConfigError(msg)
        _check_filesystem(where, filesystem)
        if not isinstance(follow, bool):
            msg = f"{where}: `follow` expected True or False; got {follow!r}"
            raise ConfigError(msg)
        if (
            isinstance(follow_interval_s, bool)
            or not isinstance(follow_interval_s, int | float)
            or not follow_interval_s > 0
        ):
            msg = f"{where}: `follow_interval_s` expected seconds > 0; got {follow_interval_s!r}"
            raise ConfigError(msg)
        if not isinstance(metadata_prefix, str):
            msg = f"{where}: `metadata_prefix` expected a string; got {metadata_prefix!r}"
            raise ConfigError(msg)
        self.path = os.fspath(path)
        self.filesystem = filesystem
        self.follow = follow
        self.follow_interval_s = float(follow_interval_s)
        self.columns = MetadataColumns(metadata_prefix)
        self._listed: list[str] | None = None
        self._watch: FileWatch | None = None
        self._lock = threading.Lock()

    def _files(self) -> IPCFiles:
        # The glob is split off first: a URI parser may refuse its `[`, `*` or `?`.
        text, pattern = split_glob(self.path.rstrip("/") or "/")
        if self.filesystem is not None:
            fs, local = self.filesystem, isinstance(self.filesystem, pafs.LocalFileSystem)
        elif "://" in text:
            try:
                fs, text = pafs.FileSystem.from_uri(text)
            except (pa.ArrowException, ValueError) as exc:
                msg = (
                    f"arrow ipc source: cannot open `{redact_url(self.path)}` "
                    f"({type(exc).__name__}); expected a directory, glob or file URI pyarrow "
                    f"can open (or pass `filesystem=`)"
                )
                raise ConfigError(msg) from None
            local = isinstance(fs, pafs.LocalFileSystem)
        else:
            fs, local, text = pafs.LocalFileSystem(), True, os.path.abspath(text)
        return IPCFiles(fs, text.rstrip("/") or "/", pattern, local)

    def files(self) -> list[str]:
        """The files this source reads: per directory, in read order (listed once)."""
        with self._lock:
            if self._listed is None:
                files = self._files()
                grouped = by_directory(files.list())
                self._listed = [p for group in grouped.values() for p in group]
                if not self._listed:
                    logger.warning(
                        "arrow ipc source: `%s` holds no visible .arrow or .arrows file",
                        redact_url(self.path),
                    )
            return self._listed

    def directories(self) -> dict[str, list[str]]:
        """Each partition's directory and its files in read order."""
        return by_directory(self.files())

    @override
    def list_parts(self) -> list[str]:
        return announce_listing([encode_part(d, 0) for d in self.directories()])

    @override
    def build_part(
        self, step_id: str, for_part: str, resume_state: tuple[str, int] | None
    ) -> IPCDirectoryPartition:
        directory, _ = decode_part(for_part)
        files = self._files()
        paths = self.directories().get(directory)
        if paths is None:  # gone since the listing: a resume says so, a fresh start ends
            paths = []
        watch = None
        if self.follow:
            with self._lock:
                if self._watch is None:
                    listed = self._listed if self._listed is not None else files.list()
                    self._watch = FileWatch(files, listed, self.follow_interval_s)
                watch = self._watch
        if resume_state is not None:
            logger.info(
                "arrow ipc source %s: `%s` resumes in `%s`", step_id, directory, resume_state
            )
        return IPCDirectoryPartition(
            key=for_part,
            directory=directory,
            paths=paths,
            files=files,
            columns=self.columns,
            resume=resume_state,
            watch=watch,
            follow_interval_s=self.follow_interval_s,
        )
