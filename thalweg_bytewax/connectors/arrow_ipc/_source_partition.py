"""Private: the per-directory partition behind ``ArrowIPCSource``.

A partition reads the finalized ``.arrow`` (IPC file format, random access) and
``.arrows`` (IPC stream format) files of one directory — as ``ArrowIPCSink`` lays them
out, one source partition — one after the other in offset order, record batch by record
batch. Local files are memory-mapped, so a batch is a view of the page cache, never a
copy or a decode. See :mod:`thalweg_bytewax.connectors.arrow_ipc` for the guarantee.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
from typing_extensions import override

from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime.paced_source import PacedPartition
from thalweg_bytewax.runtime.parts import encode_part

from ._listing import COMPONENT, FileWatch, IPCFiles

__all__ = ["IPCDirectoryPartition"]

logger = logging.getLogger(__name__)


class IPCDirectoryPartition(PacedPartition[KeyedBatch, tuple[str, int]]):
    """One directory's IPC files in read order, batch by batch.

    The state is ``(file name, index of the next batch in it)``: the file being read
    (or, at the end, the last one read and its batch count), so a resume opens that
    file at that batch and goes on with the files after it. One file is open at a time.
    """

    def __init__(
        self,
        *,
        key: str,
        directory: str,
        paths: Sequence[str],
        files: IPCFiles,
        columns: MetadataColumns,
        resume: tuple[str, int] | None,
        watch: FileWatch | None,
        follow_interval_s: float,
    ) -> None:
        self._key = key
        self._directory = directory
        self._paths = list(paths)
        self._files = files
        self._columns = columns
        self._at, self._next = self._resume_position(resume)
        self._path = self._paths[self._at] if self._paths else directory
        self._watch: FileWatch | None = None  # held once the first file is open
        self._interval = timedelta(seconds=follow_interval_s)
        self._file: pa.NativeFile | None = None
        if self._paths:
            self._open_current()
        if watch is not None:
            watch.acquire()
            self._watch = watch

    def _resume_position(self, resume: tuple[str, int] | None) -> tuple[int, int]:
        """The index of the file to read first and the batch to start it at."""
        if resume is None:
            return 0, 0
        names = [p.rpartition("/")[2] for p in self._paths]
        valid = (
            isinstance(resume, tuple)
            and len(resume) == 2  # noqa: PLR2004 - (file name, batch index)
            and isinstance(resume[0], str)
            and isinstance(resume[1], int)
        )
        if not valid:
            msg = (
                f"{COMPONENT}: `{self._directory}` resumes from state {resume!r}; expected "
                f"(file name, batch index), as this version keeps per directory. State kept "
                f"per file by an earlier version cannot place a directory's read: start with a "
                f"fresh recovery directory (an epoch sink downstream skips what it already holds)"
            )
            raise SourceError(msg)
        name, index = resume
        if name not in names:
            msg = (
                f"{COMPONENT}: `{self._directory}` resumes in `{name}` at batch {index}, which "
                f"is no longer listed there. Finalized files are never removed or renamed by "
                f"`ArrowIPCSink`: restore it, or start with a fresh recovery directory"
            )
            raise SourceError(msg)
        return names.index(name), index

    def _open_current(self) -> None:
        path = self._paths[self._at]
        self._path = path
        files = self._files
        try:
            self._file = pa.memory_map(path) if files.local else files.fs.open_input_file(path)
            self._get, self._count = self._open(self._file)
        except (OSError, pa.ArrowException) as exc:
            self.close()
            msg = (
                f"{COMPONENT}: cannot open `{path}` ({type(exc).__name__}: {exc}); expected "
                f"an Arrow IPC file or stream as `ArrowIPCSink` finalizes it"
            )
            raise SourceError(msg) from exc
        except SourceError:
            self.close()
            raise
        if self._count is not None and self._next > self._count:
            self.close()
            msg = (
                f"{COMPONENT}: `{path}` resumes at batch {self._next}; expected at most "
                f"{self._count} (the file's batches). Finalized files are never rewritten, so "
                f"this file was replaced: restore it, or start with a fresh recovery directory"
            )
            raise SourceError(msg)

    def _open(self, f: pa.NativeFile) -> tuple[Callable[[], pa.RecordBatch | None], int | None]:
        """A reader of the next batch, and the number of batches where it is known."""
        try:
            reader = ipc.open_file(f)
        except pa.ArrowInvalid:
            f.seek(0)
        else:
            count = reader.num_record_batches

            def get_file() -> pa.RecordBatch | None:
                return reader.get_batch(self._next) if self._next < count else None

            return get_file, count
        stream = ipc.open_stream(f)
        batches: Iterator[pa.RecordBatch] = iter(stream)
        for skipped in range(self._next):  # a stream has no index: skip what was emitted
            if next(batches, None) is None:
                msg = (
                    f"{COMPONENT}: `{self._path}` resumes at batch {self._next}; expected at "
                    f"most {skipped} (the stream's batches). Finalized files are never "
                    f"rewritten, so this file was replaced: restore it, or start with a fresh "
                    f"recovery directory"
                )
                raise SourceError(msg)

        def get_stream() -> pa.RecordBatch | None:
            return next(batches, None)

        return get_stream, None

    @override
    def next_batch(self) -> list[KeyedBatch]:
        while self._file is not None:
            try:
                batch = self._get()
            except (OSError, pa.ArrowException) as exc:
                msg = (
                    f"{COMPONENT}: `{self._path}` unreadable at batch {self._next} "
                    f"({type(exc).__name__}: {exc}); expected a complete finalized file"
                )
                raise SourceError(msg) from exc
            if batch is not None:
                self._next += 1
                return self._keyed(batch)
            self._close_file()
            if self._at + 1 < len(self._paths):  # on to the directory's next file
                self._at += 1
                self._next = 0
                self._open_current()
        return self._idle()

    def _idle(self) -> list[KeyedBatch]:
        if self._watch is None:
            raise StopIteration  # not following: this directory is done
        self._wake_in(self._interval)
        return []

    def _keyed(self, batch: pa.RecordBatch) -> list[KeyedBatch]:
        """Key rows by their source partition (``"orders:3"``), as the writer's sink was."""
        cols = self._columns
        names = batch.schema.names
        if batch.num_rows == 0:
            return []
        if cols.source_topic not in names or cols.source_partition not in names:
            return [(self._key, batch)]  # no locator: keyed by the directory
        topics = batch.column(cols.source_topic)
        parts = batch.column(cols.source_partition)
        if topics.null_count or parts.null_count:
            return [(self._key, batch)]  # the sink downstream refuses rows without one
        t0, p0 = topics[0].as_py(), parts[0].as_py()
        if pc.all(pc.and_(pc.equal(topics, t0), pc.equal(parts, p0))).as_py():
            return [(encode_part(t0, p0), batch)]
        groups = pa.Table.from_batches([batch]).group_by([cols.source_topic, cols.source_partition])
        pairs = groups.aggregate([])
        out = []
        for t, p in zip(pairs.column(0).to_pylist(), pairs.column(1).to_pylist(), strict=True):
            mask = pc.and_(pc.equal(topics, t), pc.equal(parts, p))
            out.append((encode_part(t, p), batch.filter(mask)))
        return out

    @override
    def snapshot(self) -> tuple[str, int]:
        return (self._path.rpartition("/")[2], self._next)

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()  # mapped batches already emitted keep their pages alive
            self._file = None

    @override
    def close(self) -> None:
        self._close_file()
        if self._watch is not None:
            self._watch.release()
            self._watch = None
