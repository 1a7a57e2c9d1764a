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
from collections.abc import Iterator
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs.json import JsonCodec
from thalweg_bytewax.system.threads import SharedPool

from ._common import (
    INFER,
    Bad,
    Chunk,
    ReadOptions,
    Target,
    cast_rows,
    decode_rows,
    rest_bad,
    whole_file_bad,
)
from ._limits import (
    FileLimits,
    LimitExceeded,
    LongLine,
    capped,
    over_limit,
)
from ._partition import compression_of

__all__ = [
    "Block",
    "ends_with_newline",
    "first_newline",
    "line_blocks",
    "long_line_message",
    "open_lines",
    "read_ndjson",
]

# Bytes per read: large enough that the codec's fixed cost per call vanishes, small
# enough to bound memory (docs/benchmarks.md "Files").
NDJSON_BLOCK_BYTES = 8 << 20

_WORKERS = max(1, min(os.cpu_count() or 1, 8))
_decode_pool = SharedPool(_WORKERS, "twg-files-json")


Block: TypeAlias = bytes | pa.Buffer
"""A block of whole lines: a slice of an Arrow buffer as read, or bytes."""


def _lines(block: Block) -> pa.Array:
    whole = block if isinstance(block, pa.Buffer) else pa.py_buffer(block)
    ends = pa.array([0, whole.size], pa.int64()).buffers()[1]
    one = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 1, [None, ends, whole])
    lines = pc.split_pattern(one, b"\n").flatten()
    return lines.cast(pa.binary())


_SCAN = 64 << 10
"""Bytes looked at a time for a block's first or last newline (lines are short)."""


def first_newline(view: memoryview, start: int = 0) -> int:
    """The index of the first newline in ``view`` at or after ``start``; -1 if none."""
    size = _SCAN
    while start < len(view):
        found = view[start : start + size].tobytes().find(b"\n")
        if found >= 0:
            return start + found
        start += size
        size = min(size * 2, 8 << 20)
    return -1


def _last_newline(view: memoryview) -> int:
    """The index of the last newline in ``view``; -1 if none."""
    end = len(view)
    size = _SCAN
    while end > 0:
        start = max(0, end - size)
        found = view[start:end].tobytes().rfind(b"\n")
        if found >= 0:
            return start + found
        end = start
        size = min(size * 2, 8 << 20)
    return -1


def _fill(f: Any, rest: bytes, block_bytes: int) -> tuple[pa.Buffer, int]:
    """An Arrow buffer holding ``rest`` and then up to ``block_bytes`` bytes of ``f``.

    The bytes are read straight into memory from pyarrow's pool (``readinto`` where the
    stream has it): a block is never a Python ``bytes`` of the C heap, whose freed
    blocks the allocator keeps (glibc raises its mmap threshold to the size of a freed
    block, and carves the next ones from its heaps), so a reader's peak stays with
    Arrow's, which the pool returns (:func:`_return_freed`).
    """
    buf = pa.allocate_buffer(len(rest) + block_bytes)
    view = memoryview(buf).cast("B")
    view[: len(rest)] = rest
    filled = len(rest)
    readinto = getattr(f, "readinto", None)
    while filled < len(view):
        if readinto is not None:
            n = readinto(view[filled:])
        else:
            data = f.read(len(view) - filled)
            n = len(data)
            view[filled : filled + n] = data
        if not n:
            break
        filled += n
    return buf, filled


def _return_freed() -> None:
    """Give pyarrow's pool's freed pages back to the system, before a block is read.

    mimalloc, pyarrow's default pool, purges a thread's freed pages only after a delay
    and when that thread allocates again; a reader's blocks come and go every few
    milliseconds on several threads. About a microsecond when nothing is to be purged.
    """
    pa.default_memory_pool().release_unused()


def line_blocks(
    f: Any, block_bytes: int, max_line: int | None = None
) -> Iterator[Block | LongLine]:
    """Blocks of about ``block_bytes`` of a binary stream, each ending at a line end.

    The last block ends where the stream does. A line longer than ``max_line`` bytes
    (without its newline) comes out alone as a :class:`LongLine` (its first ``max_line``
    bytes and its length), read past in ``block_bytes`` steps and never held whole;
    without ``max_line``, a line longer than a block makes its block longer.

    A block is a slice of an Arrow buffer read into directly (:func:`_fill`), or the
    bytes of a last line. Nothing of a block stays referenced here while its consumer
    holds it: a reader suspended between batches (every file of a worker is, in turn)
    keeps only the partial line after the block, as bytes.
    """
    cap = max_line if max_line is not None else 1 << 62
    rest = b""
    while True:
        _return_freed()
        buf, filled = _fill(f, rest, block_bytes)
        if filled == len(rest):  # the stream's end
            del buf
            if len(rest) > cap:  # a last line without a newline, over the cap
                yield LongLine(rest[:cap], len(rest))
            elif rest:
                yield rest
            return
        view = memoryview(buf).cast("B")[:filled]
        rest = b""
        first = first_newline(view)
        if (first if first >= 0 else filled) > cap:  # only a carried line can be
            data = view.tobytes()
            del view, buf
            long, rest = _long_line(f, data, block_bytes, cap)
            yield long
            continue
        cut = _last_newline(view)
        if cut < 0:
            rest = view.tobytes()
            del view, buf
            continue
        rest = view[cut + 1 :].tobytes()
        del view
        whole = [buf.slice(0, cut + 1)]
        del buf  # only the block's whole lines live on, in the slice
        if cap < block_bytes:  # a line inside one read may exceed the cap too
            yield from _split_long(whole, cap)
        else:
            yield whole.pop()  # not held by this frame while the consumer has it


def _long_line(f: Any, data: bytes, block_bytes: int, cap: int) -> tuple[LongLine, bytes]:
    """The over-long line ``data`` starts, read to its newline; and the bytes after it."""
    head = data[:cap]
    size = 0
    while True:
        nl = data.find(b"\n")
        if nl >= 0:
            return LongLine(head, size + nl), data[nl + 1 :]
        size += len(data)
        data = bytes(f.read(block_bytes))
        if not data:
            return LongLine(head, size), b""


def _split_long(whole: list[pa.Buffer], cap: int) -> Iterator[Block | LongLine]:
    """A block of whole lines, its lines over ``cap`` bytes cut out as ``LongLine``.

    ``whole`` holds the block; it is taken out when no line is over the cap, so the
    block is not held here while its consumer has it.
    """
    a = np.frombuffer(whole[0], np.uint8)
    ends = np.flatnonzero(a == ord("\n"))
    starts = np.concatenate(([0], ends[:-1] + 1))
    over = np.flatnonzero(ends - starts > cap)
    del a
    if not len(over):
        yield whole.pop()
        return
    block = whole.pop()
    at = 0
    for i in over:
        s, e = int(starts[i]), int(ends[i])
        if s > at:
            yield block.slice(at, s - at)
        yield LongLine(block.slice(s, cap).to_pybytes(), e - s)
        at = e + 1
    if at < block.size:
        yield block.slice(at)


def long_line_message(line: LongLine, cap: int) -> str:
    """The DLQ message of a line over ``max_line_bytes``."""
    what = f"a line of {line.size:,} bytes; its first {len(line.head):,} bytes are kept"
    return over_limit("max_line_bytes", cap, what)


def open_lines(target: Target, limits: FileLimits) -> Any:
    """The file's stream, counted against ``max_decompressed_bytes`` when compressed."""
    stream = target.stream()
    compressed = compression_of(target.path) is not None
    return capped(stream, limits.max_decompressed_bytes if compressed else None)


def _blocks(target: Target, block_bytes: int, limits: FileLimits) -> Iterator[Block | LongLine]:
    with open_lines(target, limits) as f:
        yield from line_blocks(f, block_bytes, limits.max_line_bytes)


def read_ndjson(target: Target, start: int, options: ReadOptions) -> Iterator[Chunk]:
    """NDJSON lines decoded by the JSON codec, in line order."""
    schema, batch_rows, limits = options.schema, options.batch_rows, options.limits
    codec = JsonCodec(schema if schema is not None else INFER)
    first = 0
    try:
        for block in _blocks(target, NDJSON_BLOCK_BYTES, limits):
            if isinstance(block, LongLine):
                if first >= start:
                    msg = long_line_message(block, limits.max_line_bytes)
                    yield Chunk(None, np.zeros(0, np.int64), first + 1,
                                bad=[Bad(first, msg, block.head)])
                first += 1
                continue
            lines = _lines(block)
            if ends_with_newline(block):
                lines = lines.slice(0, len(lines) - 1)  # after the last newline: nothing
            del block  # in `lines` now: not held while the lines' rows are out
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
    except LimitExceeded as exc:
        yield rest_bad(max(first, start), f"NDJSON from line {first}", exc)
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
    values: pa.Array | None
    rows, good, values, bad = decode_rows(codec, lines, offsets)
    if rows is not None and schema_differs(rows, codec):
        rows, good, more = cast_rows(rows, codec.arrow_schema, 0, good)
        bad += more
        values = None
    return Chunk(rows, good, first + n, values if rows is not None else None, bad)


def ends_with_newline(block: Block) -> bool:
    """Whether a block's last byte is a newline."""
    size = len(block)
    return size > 0 and memoryview(block).cast("B")[size - 1] == ord("\n")


def schema_differs(rows: pa.RecordBatch, codec: JsonCodec) -> bool:
    """Whether a decoded batch is not yet exactly the codec's schema (never, normally)."""
    return not rows.schema.equals(codec.arrow_schema, check_metadata=False)
