"""Private to :mod:`thalweg_bytewax.connectors.files`: NDJSON through the JSON codec.

The file (decompressed as it is read when its name ends in ``.gz`` and the like) is
read in blocks of bytes cut at the last newline; each block's lines are
split columnar (``pyarrow.compute.split_pattern``) and decoded by
:class:`~thalweg_bytewax.codecs.JsonCodec` — the same decode a Kafka record with a JSON
payload gets, so a line and a record with the same bytes decode to the same row. A
line that does not decode goes to the DLQ with the codec's reason; the raw line is the
row's ``_twg_source_value`` and what its record id hashes. The row index of a line is
its 0-based line number; blank lines count, and yield nothing.

With the codec's native reader (it parses without the GIL) a block's lines are cut
into one piece per core and decoded at once, on a shared thread pool; the pieces come
out in line order.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs.json import JsonCodec

from ._files_common import INFER, Bad, Chunk, Target, cast_rows, whole_file_bad

__all__ = ["line_blocks", "read_ndjson"]

# Bytes per read: large enough that the codec's fixed cost per call vanishes, small
# enough to bound memory (docs/benchmarks.md "Files").
NDJSON_BLOCK_BYTES = 8 << 20

_WORKERS = max(1, min(os.cpu_count() or 1, 8))
_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _decode_pool() -> ThreadPoolExecutor:
    global _pool  # noqa: PLW0603 - one pool per process, started on first use
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="twg-files-json")
        return _pool


def _lines(block: bytes) -> pa.Array:
    lines = pc.split_pattern(pa.array([block], pa.large_binary()), b"\n").flatten()
    return lines.cast(pa.binary())


def line_blocks(f: Any, block_bytes: int) -> Iterator[bytes]:
    """Blocks of about ``block_bytes`` of a binary stream, each ending at a line end.

    The last block ends where the stream does; a line longer than a block makes its
    block longer.
    """
    rest = b""
    while True:
        data = bytes(f.read(block_bytes))
        if not data:
            if rest:
                yield rest
            return
        data = rest + data if rest else data
        cut = data.rfind(b"\n")
        if cut < 0:
            rest = data
            continue
        yield data[: cut + 1]
        rest = data[cut + 1 :]


def _blocks(target: Target, block_bytes: int) -> Iterator[bytes]:
    with target.stream() as f:
        yield from line_blocks(f, block_bytes)


def read_ndjson(
    target: Target, start: int, schema: pa.Schema | None, batch_rows: int
) -> Iterator[Chunk]:
    """NDJSON lines decoded by the JSON codec, in line order."""
    codec = JsonCodec(schema if schema is not None else INFER)
    first = 0
    try:
        for block in _blocks(target, NDJSON_BLOCK_BYTES):
            lines = _lines(block)
            if block.endswith(b"\n"):
                lines = lines.slice(0, len(lines) - 1)  # after the last newline: nothing
            n = len(lines)
            size = batch_rows
            if codec.concurrent_batches:  # one piece per core at least
                size = max(1, min(batch_rows, -(-n // _WORKERS)))
            pieces = [i for i in range(0, n, size) if first + i + size > start]

            def decode(i: int, at: int = first, part: pa.Array = lines, k: int = size) -> Chunk:
                return _decode(codec, part.slice(i, k), at + i, start)

            if codec.concurrent_batches and len(pieces) > 1:
                yield from _decode_pool().map(decode, pieces)
            else:
                yield from map(decode, pieces)
            first += n
    except (OSError, pa.ArrowException) as exc:
        yield whole_file_bad(max(first, start), "NDJSON unreadable", exc)


def _decode(codec: JsonCodec, lines: pa.Array, first: int, start: int) -> Chunk:
    n = len(lines)
    offsets = np.arange(first, first + n, dtype=np.int64)
    blank = pc.or_(pc.equal(pc.binary_length(lines), 0), pc.equal(lines, b"\r"))
    keep = (offsets >= start) & ~blank.to_numpy(zero_copy_only=False)
    if not keep.all():
        lines = lines.filter(pa.array(keep))
        offsets = offsets[keep]
    if len(lines) == 0:
        return Chunk(None, offsets, first + n)
    result = codec.decode_batch(lines)
    bad = [Bad(int(offsets[e.index]), f"{e.kind}: {e.message}", lines[e.index].as_py())
           for e in result.errors]
    good = offsets
    values: pa.Array | None = lines
    if result.errors:
        mask = np.ones(len(lines), dtype=bool)
        mask[[e.index for e in result.errors]] = False
        good = offsets[mask]
        values = lines.filter(pa.array(mask))
    rows = result.batch if result.batch.num_rows else None
    if rows is not None and schema_differs(rows, codec):
        rows, good, more = cast_rows(rows, codec.arrow_schema, 0, good)
        bad += more
        values = None
    return Chunk(rows, good, first + n, values if rows is not None else None, bad)


def schema_differs(rows: pa.RecordBatch, codec: JsonCodec) -> bool:
    """Whether a decoded batch is not yet exactly the codec's schema (never, normally)."""
    return not rows.schema.equals(codec.arrow_schema, check_metadata=False)
