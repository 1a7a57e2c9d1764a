"""Private to :mod:`thalweg_bytewax.connectors.files`: the partition of one file.

Turns a format reader's chunks into keyed output: good rows with the metadata columns
of the policy (path as topic, partition 0, row index as offset, record id over the
row's raw bytes or none), and DLQ batches for the rows and pieces that did not read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

import numpy as np
import pyarrow as pa
from bytewax.inputs import StatefulSourcePartition
from typing_extensions import override

from thalweg_bytewax._deps import require
from thalweg_bytewax.dlq import RejectReason, dlq_batch_from_rows
from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.input_span import with_input_span
from thalweg_bytewax.metadata import MetadataColumns, record_ids_array
from thalweg_bytewax.record import KeyedBatch

from ._files_common import Bad, Chunk

__all__ = ["FilePartition", "FileTarget", "is_url"]

logger = logging.getLogger(__name__)


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

    def source(self) -> str | IO[bytes]:
        """What pyarrow readers take: the local path, or an open fsspec file."""
        return self.path if self.local else self.open()

    def open(self) -> IO[bytes]:
        """A fresh binary file object."""
        if self.local:
            return open(self.path, "rb")  # noqa: SIM115 - the reader closes it
        fsspec = require("fsspec", extra="files")
        f: IO[bytes] = fsspec.open(self.path, "rb", **self.storage_options).open()
        return f



class FilePartition(StatefulSourcePartition[KeyedBatch, int]):
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
        self._key = key
        self._path = path
        self._fmt = fmt
        self._columns = columns
        self._next_row = next_row
        self._meta_fields = meta_fields
        self._chunks = chunks
        self._warned = False

    @override
    def next_batch(self) -> list[KeyedBatch]:
        try:
            chunk = next(self._chunks)
        except OSError as exc:
            msg = (
                f"file source `{self._step_id}`: cannot read `{self._path}` "
                f"({type(exc).__name__}); expected a readable file"
            )
            raise SourceError(msg) from exc
        out: list[KeyedBatch] = []
        ok = self._ok(chunk)
        if ok is not None:
            out.append((self._key, ok))
        if chunk.bad:
            out.append((self._key, self._rejected(chunk)))
        self._next_row = max(self._next_row, chunk.next_row)
        return out

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
            return pa.repeat(pa.scalar(self._path, pa.string()), n)
        if f.name == c.source_partition:
            return pa.repeat(pa.scalar(0, pa.int32()), n)
        if f.name == c.source_offset:
            return offsets
        if f.name == c.record_id:
            return record_ids_array(None, self._path, 0, offsets, values)
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
                c.source_topic: pa.repeat(pa.scalar(self._path, pa.string()), n),
                c.source_partition: pa.repeat(pa.scalar(0, pa.int32()), n),
                c.source_offset: offsets,
                c.record_id: record_ids_array(None, self._path, 0, offsets, values),
                c.source_value: values,
            }
        )
        messages = [f"{self._fmt} read failed at `{self._path}@{b.row}`: {b.message}" for b in bad]
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
    def next_awake(self) -> datetime | None:
        return None

    @override
    def snapshot(self) -> int:
        return self._next_row

    @override
    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()
