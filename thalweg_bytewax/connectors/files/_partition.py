"""Private to :mod:`thalweg_bytewax.connectors.files`: the partition of one file.

Turns a format reader's chunks into keyed output: good rows with the metadata columns
of the policy (path as topic, partition 0, row index as offset, record id over the
row's raw bytes or none), and DLQ batches for the rows and pieces that did not read.

The next chunk is prepared (read, cast, record ids hashed) on a background thread
while the flow handles the one just emitted: pyarrow's readers and the record-id
hasher release the GIL, so reading overlaps the operators and sinks downstream. At
most :data:`AHEAD_CHUNKS` chunks are prepared ahead per process, whatever the number
of files, so memory stays bounded; a partition that finds no free slot prepares its
next chunk in line. The state is the row after the last *emitted* chunk, never a
prepared one.

A URL's credentials (userinfo, query values) never leave the partition: the topic
column, the record ids, the DLQ rows, messages and logs name the file by
:func:`~thalweg_bytewax._redact.redact_url` of its URL.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

import numpy as np
import pyarrow as pa
from typing_extensions import override

from thalweg_bytewax._deps import require
from thalweg_bytewax._redact import redact_origins_in, redact_url
from thalweg_bytewax.coverage.input_span import with_input_span
from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.lanes.dlq import RejectReason, dlq_batch_from_rows
from thalweg_bytewax.records.ids import record_ids_array
from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime import admission
from thalweg_bytewax.runtime.paced_source import PacedPartition
from thalweg_bytewax.system.threads import SharedPool

from ._common import Bad, Chunk

__all__ = ["AHEAD_CHUNKS", "COMPRESSED_SUFFIXES", "FilePartition", "FileTarget", "is_url"]

logger = logging.getLogger(__name__)

AHEAD_CHUNKS = 2
"""Chunks prepared ahead on the background thread, per process, at most."""

COMPRESSED_SUFFIXES = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".lz4": "lz4"}
"""Compression of a line format (CSV, NDJSON) by the file's last suffix."""

_slots = threading.BoundedSemaphore(AHEAD_CHUNKS)
_ahead_pool = SharedPool(1, "twg-files-ahead")
"""The process's one read-ahead thread."""


def compression_of(path: str) -> str | None:
    """The compression a path's last suffix names (``.gz``: gzip), or ``None``."""
    name = path_name(path)
    for suffix, codec in COMPRESSED_SUFFIXES.items():
        if name.endswith(suffix):
            return codec
    return None


def path_name(path: str) -> str:
    """The lower-case last path segment, without a URL's query or fragment."""
    if is_url(path):
        path = path.split("?", 1)[0].split("#", 1)[0]
    return path.lower().rsplit("/", 1)[-1]


def is_url(path: str) -> bool:
    """Whether ``path`` is an fsspec URL rather than a local path."""
    return "://" in path and not path.startswith("file://")


@dataclass(frozen=True)
class FileTarget:
    """A file of a partition: local path or fsspec URL, opened on demand."""

    path: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def local(self) -> bool:
        """Whether the path is a local one."""
        return not is_url(self.path)

    @property
    def name(self) -> str:
        """The path as messages, logs and the topic column name it (no credentials)."""
        return redact_url(self.path)

    def source(self) -> str | IO[bytes]:
        """What pyarrow readers take: the local path, or an open fsspec file."""
        return self.path if self.local else self.open()

    def open(self) -> IO[bytes]:
        """A fresh binary file object, as stored (still compressed)."""
        if self.local:
            return open(self.path, "rb")  # noqa: SIM115 - the reader closes it
        fsspec = require("fsspec", extra="files")
        f: IO[bytes] = fsspec.open(self.path, "rb", **self.storage_options).open()
        return f

    def stream(self) -> pa.NativeFile:
        """The file's bytes, decompressed when its suffix names a compression."""
        src: Any = self.path if self.local else self.open()
        return pa.input_stream(src, compression=compression_of(self.path))


class FilePartition(PacedPartition[KeyedBatch, int]):
    """One file: its chunks as keyed batches and DLQ batches; state = the next row."""

    def __init__(
        self,
        step_id: str,
        key: str,
        path: str,
        fmt: str,
        chunks: Iterator[Chunk],
        columns: MetadataColumns,
        meta_fields: list[pa.Field],
        next_row: int,
    ) -> None:
        self._step_id = step_id
        self._flow = admission.flow_of(step_id)
        self._next_awake: datetime | None = None
        self._key = key
        self._path = path
        self._fmt = fmt
        self._columns = columns
        self._next_row = next_row
        self._meta_fields = meta_fields
        self._chunks = chunks
        self._warned = False
        self._name = redact_url(path)
        self._pending: Future[tuple[list[KeyedBatch], int] | None] | None = None

    @override
    def next_batch(self) -> list[KeyedBatch]:
        self._next_awake = admission.ledger().admit(self._flow, self._key)
        if self._next_awake is not None:  # a sink of this process is behind: read nothing yet
            return []
        pending, self._pending = self._pending, None
        if pending is not None:
            try:
                prepared = pending.result()
            finally:
                _slots.release()
        else:
            prepared = self._prepare()
        if prepared is None:
            raise StopIteration
        out, next_row = prepared
        self._next_row = max(self._next_row, next_row)
        nbytes = sum(batch.nbytes for _, batch in out)
        admission.ledger().emitted(self._flow, self._key, next_row - 1, nbytes)
        if _slots.acquire(blocking=False):
            try:
                self._pending = _ahead_pool().submit(self._prepare)
            except BaseException:
                _slots.release()
                raise
        return out

    def _prepare(self) -> tuple[list[KeyedBatch], int] | None:
        """The output of the next chunk and the row after it; ``None`` at the end."""
        try:
            chunk = next(self._chunks)
        except StopIteration:
            return None
        except OSError as exc:
            cause = redact_origins_in(str(exc), self._path)
            msg = (
                f"file source `{self._step_id}`: cannot read `{self._name}` "
                f"({type(exc).__name__}: {cause}); expected a readable file"
            )
            if self._name != self._path:  # the cause may quote the URL's secrets
                raise SourceError(msg) from None
            raise SourceError(msg) from exc
        out: list[KeyedBatch] = []
        ok = self._ok(chunk)
        if ok is not None:
            out.append((self._key, ok))
        if chunk.bad:
            out.append((self._key, self._rejected(chunk)))
        return out, chunk.next_row

    def _ok(self, chunk: Chunk) -> pa.RecordBatch | None:
        rows = chunk.rows
        if rows is None or rows.num_rows == 0:
            return None
        reserved = [n for n in rows.schema.names if self._columns.is_reserved(n)]
        if reserved:
            msg = (
                f"payload column(s) {', '.join(reserved)} fall under the reserved metadata "
                f"prefix `{self._columns.prefix}`; rename them or configure another prefix"
            )
            chunk.bad.extend(Bad(int(o), msg) for o in chunk.offsets)
            return None
        n = rows.num_rows
        offsets = pa.array(chunk.offsets, pa.int64())
        values = chunk.values if chunk.values is not None else pa.nulls(n, pa.binary())
        arrays = [self._meta(f, n, offsets, values) for f in self._meta_fields]
        batch = pa.RecordBatch.from_arrays(
            [*rows.columns, *arrays],
            schema=pa.schema([*rows.schema, *self._meta_fields]),
        )
        if chunk.bad:
            rows_at = [int(chunk.offsets[0]), int(chunk.offsets[-1])]
            rows_at += [b.row for b in chunk.bad if b.row >= 0]
            batch = with_input_span(batch, self._key, min(rows_at), max(rows_at))
        return batch

    def _meta(self, f: pa.Field, n: int, offsets: pa.Array, values: pa.Array) -> pa.Array:
        c = self._columns
        if f.name == c.source_topic:
            return pa.repeat(pa.scalar(self._name, pa.string()), n)
        if f.name == c.source_partition:
            return pa.repeat(pa.scalar(0, pa.int32()), n)
        if f.name == c.source_offset:
            return offsets
        if f.name == c.record_id:
            return record_ids_array(None, self._name, 0, offsets, values)
        if f.name == c.source_timestamp_type:
            return pa.repeat(pa.scalar("NotAvailable", pa.string()), n)
        if f.name == c.ingest_ts:
            return pa.repeat(pa.scalar(datetime.now(UTC), f.type), n)
        if f.name == c.source_value:
            return values
        return pa.nulls(n, f.type)

    def _rejected(self, chunk: Chunk) -> pa.RecordBatch:
        c = self._columns
        bad = chunk.bad  # only failed rows and pieces: bounded by the rejects
        offsets = pa.array([b.row for b in bad], pa.int64())
        values = pa.array([b.raw for b in bad], pa.binary())
        n = len(bad)
        raw = pa.RecordBatch.from_pydict(
            {
                c.source_topic: pa.repeat(pa.scalar(self._name, pa.string()), n),
                c.source_partition: pa.repeat(pa.scalar(0, pa.int32()), n),
                c.source_offset: offsets,
                c.record_id: record_ids_array(None, self._name, 0, offsets, values),
                c.source_value: values,
            }
        )
        messages = [
            f"{self._fmt} read failed at `{self._name}@{b.row}`: "
            f"{redact_origins_in(b.message, self._path)}"
            for b in bad
        ]
        if not self._warned:
            self._warned = True
            logger.warning(
                "file source %s: first unreadable row(s), sent to the DLQ: %s",
                self._step_id,
                messages[0],
            )
        return dlq_batch_from_rows(
            raw,
            pa.array(np.arange(n), pa.int64()),
            reason=RejectReason.DECODE,
            step_id=self._step_id,
            messages=messages,
            columns=c,
        )

    @override
    def snapshot(self) -> int:
        return self._next_row

    @override
    def close(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            try:
                pending.result()
            except Exception:  # noqa: BLE001, S110 - closing: the read is abandoned
                pass
            finally:
                _slots.release()
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()
