"""Private to :mod:`thalweg_bytewax.connectors.files`: what every format reader shares.

A format reader turns one file into :class:`Chunk` objects, in row order, starting at a
row index (the resume position). A chunk holds the rows that read well, cast to the
target schema, with their row indices, optionally their raw bytes (the line of a line
format, the body of an Avro record), and the rows or byte runs that did not read, each
with a reason. The partition turns chunks into keyed output batches: payload columns
plus metadata columns, and DLQ batches.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from thalweg_bytewax.errors import ConfigError

from ._limits import DEFAULT_LIMITS, FileLimits

if TYPE_CHECKING:
    from thalweg_bytewax.codecs.base import Codec

__all__ = [
    "INFER",
    "Bad",
    "Chunk",
    "ReadOptions",
    "Reader",
    "Target",
    "cast_rows",
    "check_schema_arg",
    "decode_rows",
    "chunk_of",
    "rest_bad",
    "row_json",
    "typed_chunk",
    "whole_file_bad",
]

INFER = "infer"
"""The ``schema=`` value that asks a format without its own schema to infer one."""


class Target(Protocol):
    """The file of one partition: its name, and how to open it (local or fsspec)."""

    @property
    def path(self) -> str:
        """The path or URL, as the metadata columns name it."""
        ...

    @property
    def name(self) -> str:
        """The path as messages and logs name it: a URL without its credentials."""
        ...

    def source(self) -> str | IO[bytes]:
        """What pyarrow readers take: the local path, or an open fsspec file."""
        ...

    def open(self) -> IO[bytes]:
        """A fresh binary file object, positioned at 0."""
        ...

    def stream(self) -> pa.NativeFile:
        """The file's bytes, decompressed when its suffix names a compression."""
        ...


@dataclass(frozen=True, slots=True)
class Bad:
    """A row (or a run of bytes standing for rows) that could not be read."""

    row: int
    message: str
    raw: bytes | None = None


@dataclass(slots=True)
class Chunk:
    """Rows read from one piece of a file (a row group, a block, a window)."""

    rows: pa.RecordBatch | None
    offsets: np.ndarray
    next_row: int
    values: pa.Array | None = None
    bad: list[Bad] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """How a format reader reads a file: the settings every reader takes.

    Built once per partition from the source's settings and handed to the reader of
    its file; a format's own settings (an Excel sheet, an XML record path) are keywords
    of that format's reader.

    Attributes:
        schema: The schema rows are cast to; ``None``: the file's own (Parquet, Arrow
            IPC, Avro) or the one inferred from the file's first rows.
        batch_rows: Rows per chunk at most (Avro: a block's rows at most).
        limits: Bounds on what one file may make the reader allocate; what exceeds one
            is a bad row naming the bound.
    """

    schema: pa.Schema | None
    batch_rows: int
    limits: FileLimits = DEFAULT_LIMITS


class Reader(Protocol):
    """A format reader: chunks of one file from a row index on."""

    def __call__(self, target: Target, start: int, options: ReadOptions) -> Iterator[Chunk]:
        """Chunks in row order; rows before ``start`` are skipped, never emitted."""
        ...


def chunk_of(
    rows: pa.RecordBatch,
    first: int,
    start: int,
    *,
    values: pa.Array | None = None,
    bad: list[Bad] | None = None,
) -> Chunk:
    """A chunk of consecutive rows ``first..`` with those before ``start`` cut off."""
    n = rows.num_rows
    skip = min(max(start - first, 0), n)
    if skip:
        rows = rows.slice(skip)
        values = values.slice(skip) if values is not None else None
    offsets = np.arange(first + skip, first + n, dtype=np.int64)
    kept = [b for b in bad or [] if b.row >= start]
    return Chunk(rows if rows.num_rows else None, offsets, first + n, values, kept)


def decode_rows(
    codec: Codec, payloads: pa.Array, offsets: np.ndarray
) -> tuple[pa.RecordBatch | None, np.ndarray, pa.Array, list[Bad]]:
    """``payloads`` (the rows at ``offsets``) decoded by ``codec``.

    Returns:
        The decoded rows (``None`` when none decoded), the offsets and payloads of the
        rows that decoded, and one :class:`Bad` per payload that did not (its offset,
        the failure, the payload).
    """
    result = codec.decode_batch(payloads)
    bad = [
        Bad(int(offsets[e.index]), f"{e.kind}: {e.message}", payloads[e.index].as_py())
        for e in result.errors
    ]
    if result.errors:
        mask = np.ones(len(payloads), dtype=bool)
        mask[[e.index for e in result.errors]] = False
        offsets = offsets[mask]
        payloads = payloads.filter(pa.array(mask))
    rows = result.batch if result.batch.num_rows else None
    return rows, offsets, payloads, bad


def row_json(batch: pa.RecordBatch, i: int) -> str:
    """One row as JSON text, for a DLQ message or raw value (failure path only)."""
    return json.dumps(batch.slice(i, 1).to_pylist()[0], default=str, ensure_ascii=False)


def cast_rows(
    batch: pa.RecordBatch, schema: pa.Schema, first: int, offsets: np.ndarray | None = None
) -> tuple[pa.RecordBatch | None, np.ndarray, list[Bad]]:
    """``batch`` cast to ``schema`` (by name), or the rows that cast, and the others.

    The whole batch is cast at once; only when that fails is it cast row by row, to
    send exactly the rows that do not fit to the DLQ (bounded by the failing chunk).

    Args:
        batch: Rows as the format read them.
        schema: The target schema (a contract's, or one the caller gave).
        first: The row index of the first row (when ``offsets`` is not given).
        offsets: The row index of each row.

    Returns:
        The cast rows (``None`` when none cast), their row indices and the failures.
    """
    offs = offsets if offsets is not None else np.arange(first, first + batch.num_rows)
    missing = [f.name for f in schema if f.name not in batch.schema.names]
    if missing:
        names = ", ".join(f"`{m}`" for m in missing)
        msg = (
            f"expected column(s) {names} of the schema; got columns "
            f"{', '.join(batch.schema.names)}"
        )
        return None, offs[:0], [Bad(int(offs[0]), msg)] if len(offs) else []
    selected = batch.select(schema.names)
    try:
        return _cast(selected, schema), offs, []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass
    good: list[int] = []
    bad: list[Bad] = []
    for i in range(selected.num_rows):
        try:
            _cast(selected.slice(i, 1), schema)
            good.append(i)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            text = row_json(selected, i)
            bad.append(Bad(int(offs[i]), f"row does not fit the schema: {exc}", text.encode()))
    if not good:
        return None, offs[:0], bad
    idx = np.asarray(good, dtype=np.int64)
    return _cast(selected.take(pa.array(idx)), schema), offs[idx], bad



def typed_chunk(batch: pa.RecordBatch, schema: pa.Schema | None, first: int, start: int) -> Chunk:
    """:func:`chunk_of` a batch, its rows cast to ``schema`` when one is given.

    For a format that reads whole batches with types of its own (Parquet, Arrow IPC,
    Excel): the rows that do not fit ``schema`` become the chunk's bad rows.
    """
    chunk = chunk_of(batch, first, start)
    if schema is None or chunk.rows is None:
        return chunk
    rows, offsets, bad = cast_rows(chunk.rows, schema, 0, chunk.offsets)
    return Chunk(rows, offsets, chunk.next_row, None, bad)

def _cast(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema, check_metadata=False):
        return batch
    arrays = []
    for col, f in zip(batch.columns, schema, strict=True):
        arr = col if col.type == f.type else col.cast(f.type, safe=True)
        if not f.nullable and arr.null_count:
            msg = f"column `{f.name}` is required; got {arr.null_count} null(s)"
            raise pa.ArrowInvalid(msg)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def check_schema_arg(schema: Any, where: str) -> None:
    """A ``ConfigError`` unless ``schema`` is a usable ``schema=`` argument."""
    if schema is None or isinstance(schema, pa.Schema) or schema == INFER:
        return
    msg = (
        f"{where}: `schema` expected an Arrow schema, a data contract, {INFER!r} or None; "
        f"got {type(schema).__name__}"
    )
    raise ConfigError(msg)


# Errors that say the file cannot be opened at all: not bad data, a source failure.
_UNOPENABLE = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)


def whole_file_bad(start: int, what: str, exc: BaseException) -> Chunk:
    """A chunk that says the rest of a file from ``start`` could not be read.

    A file that cannot be opened at all (gone, no permission, a directory) is not bad data:
    its error is raised again, and the partition turns it into a ``SourceError`` naming the
    file, rather than a DLQ row that would make a missing input look like a rejected one.
    """
    if isinstance(exc, _UNOPENABLE):
        raise exc
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return Chunk(None, np.zeros(0, np.int64), start, bad=[Bad(start, f"{what}: {text}")])


def rest_bad(start: int, what: str, exc: BaseException) -> Chunk:
    """A chunk that says the rest of a file, ``what``, was not read: a bound stopped it."""
    return Chunk(None, np.zeros(0, np.int64), start, bad=[Bad(start, f"{what}: {exc}")])
