"""Private to :mod:`thalweg_bytewax.connectors.files`: Parquet and Arrow IPC readers.

Each reads columnar with pyarrow's own readers, one piece at a time (a Parquet row
group, an IPC record batch), so memory stays bounded by the piece. Resume skips whole
pieces by their row counts, unread. A Parquet row group of up to
:data:`WHOLE_ROW_GROUP_BYTES` (uncompressed) is read whole, its column chunks fetched
in one pre-buffered pass and decoded on every core, then cut into batches of
``batch_rows``; a larger one is streamed in batches, so memory stays bounded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import IO

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ._common import Bad, Chunk, ReadOptions, Target, typed_chunk, whole_file_bad
from ._limits import over_limit

__all__ = ["read_ipc", "read_parquet"]

logger = logging.getLogger(__name__)

WHOLE_ROW_GROUP_BYTES = 256 << 20
"""Parquet row groups up to this size (uncompressed) are read in one call."""


def read_parquet(target: Target, start: int, options: ReadOptions) -> Iterator[Chunk]:
    """Parquet, row group by row group; row groups before ``start`` are never read."""
    schema, batch_rows, limits = options.schema, options.batch_rows, options.limits
    try:
        f = pq.ParquetFile(target.source(), pre_buffer=True)
    except (OSError, pa.ArrowException) as exc:
        yield whole_file_bad(start, "cannot read the Parquet footer", exc)
        return
    meta = f.metadata
    columns = None
    if schema is not None:
        have = set(f.schema_arrow.names)
        columns = [n for n in schema.names if n in have]
    first = 0
    for rg in range(meta.num_row_groups):
        n = meta.row_group(rg).num_rows
        if first + n <= start:
            first += n
            continue
        done = first
        size = _group_bytes(meta.row_group(rg)) + 8 * n
        if size > limits.max_piece_bytes:
            what = f"row group {rg} of {n:,} rows declares {size:,} bytes uncompressed"
            msg = over_limit("max_piece_bytes", limits.max_piece_bytes, what)
            yield Chunk(None, np.zeros(0, np.int64), first + n, bad=[Bad(max(first, start), msg)])
            first += n
            continue
        try:
            if meta.row_group(rg).total_byte_size <= WHOLE_ROW_GROUP_BYTES:
                group = f.read_row_group(rg, columns=columns, use_threads=True)
                batches = iter(group.to_batches(max_chunksize=batch_rows))
            else:
                batches = f.iter_batches(batch_size=batch_rows, row_groups=[rg], columns=columns)
            for batch in batches:
                yield typed_chunk(batch, schema, done, start)
                done += batch.num_rows
        except (OSError, pa.ArrowException) as exc:
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            msg = f"row group {rg} unreadable from row {done} ({first + n - done} rows): {text}"
            yield Chunk(None, np.zeros(0, np.int64), first + n, bad=[Bad(max(done, start), msg)])
        first += n


def _group_bytes(group: pq.RowGroupMetaData) -> int:
    """A row group's bytes uncompressed, as its column chunks declare them."""
    return sum(
        max(0, group.column(i).total_uncompressed_size) for i in range(group.num_columns)
    )


def read_ipc(target: Target, start: int, options: ReadOptions) -> Iterator[Chunk]:
    """Arrow IPC (file or stream format), record batch by record batch.

    Every batch is validated in full before use (offsets within their buffers, UTF-8
    text): an IPC file is bytes from outside, and an out-of-bounds offset would be read
    by every kernel downstream. A batch that does not validate, or declares more than
    ``max_piece_bytes`` (its buffers plus 8 bytes a row), stops the file there: its
    row count is not to be trusted, so the rest of the file is one DLQ row.
    """
    schema, batch_rows, limits = options.schema, options.batch_rows, options.limits
    try:
        try:
            reader = ipc.open_file(_ipc_input(target))
            batches: Iterator[pa.RecordBatch] = (
                reader.get_batch(i) for i in range(reader.num_record_batches)
            )
        except pa.ArrowInvalid:
            batches = iter(ipc.open_stream(_ipc_input(target)))
    except (OSError, MemoryError, pa.ArrowException) as exc:
        yield whole_file_bad(start, "cannot open the Arrow IPC file", exc)
        return
    first = 0
    try:
        for batch in batches:
            n = batch.num_rows
            size = batch.get_total_buffer_size() + 8 * n
            if size > limits.max_piece_bytes:
                what = f"a record batch of {n:,} rows and {size:,} bytes from row {first}"
                msg = over_limit("max_piece_bytes", limits.max_piece_bytes, what)
                yield Chunk(None, np.zeros(0, np.int64), first, bad=[Bad(max(first, start), msg)])
                return
            batch.validate(full=True)
            if first + n > start:
                for i in range(0, n, batch_rows):
                    yield typed_chunk(batch.slice(i, batch_rows), schema, first + i, start)
            first += n
    except (OSError, MemoryError, pa.ArrowException) as exc:
        yield whole_file_bad(max(first, start), f"Arrow IPC unreadable from row {first}", exc)


def _ipc_input(target: Target) -> str | IO[bytes] | pa.NativeFile:
    """What the IPC readers read: a local file memory-mapped, a URL's file as opened.

    Mapped, a message's declared length is checked against the mapping and never
    allocated up front (a Python file's ``read(n)`` allocates ``n`` bytes first).
    """
    src = target.source()
    return pa.memory_map(src) if isinstance(src, str) else target.open()
