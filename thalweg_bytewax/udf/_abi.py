"""Private: the ABI's column types and the buffers of a column chunk as the host copies them.

Each argument type (:class:`ArgType`) has an Arrow type, a DuckDB type and a number of
ABI buffers (``values, validity`` or ``offsets, data, validity``). A chunk of a column
crosses as those buffers: validity as an Arrow bitmap from bit 0 (none when the chunk has
no nulls), string offsets rebased to 0, values as an address into the Arrow buffer (no
copy until the host writes them into the instance's memory).
"""

from __future__ import annotations

import ctypes
from enum import StrEnum
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "ARROW_TYPES",
    "BUFFER_COUNTS",
    "DUCKDB_TYPES",
    "WASM_PAGE",
    "ArgType",
    "bitmap",
    "column_buffers",
    "memory_base",
    "validity_and",
]

WASM_PAGE = 65536
"""Bytes per page of a WASM linear memory."""


class ArgType(StrEnum):
    """The column types of the ABI, as arguments and (``int64``, ``float64``) results."""

    INT64 = "int64"
    FLOAT64 = "float64"
    UTF8 = "utf8"


ARROW_TYPES = {ArgType.INT64: pa.int64(), ArgType.FLOAT64: pa.float64(), ArgType.UTF8: pa.string()}
DUCKDB_TYPES = {ArgType.INT64: "BIGINT", ArgType.FLOAT64: "DOUBLE", ArgType.UTF8: "VARCHAR"}
BUFFER_COUNTS = {ArgType.INT64: 2, ArgType.FLOAT64: 2, ArgType.UTF8: 3}


def memory_base(memory: Any, store: Any) -> int:
    """The host address of byte 0 of ``memory`` (it moves when the memory grows)."""
    address = ctypes.cast(memory.data_ptr(store), ctypes.c_void_p).value
    return int(address or 0)


def bitmap(col: pa.Array) -> bytes | None:
    """``col``'s validity as a bitmap from bit 0, or ``None`` when it has no nulls."""
    if col.null_count == 0:
        return None
    valid = pc.is_valid(col)
    packed: bytes = np.packbits(valid.to_numpy(zero_copy_only=False), bitorder="little").tobytes()
    return packed


def validity_and(cols: list[pa.Array], n: int) -> bytes:
    """The AND of ``cols``' validity bitmaps over ``n`` rows (all valid when none has nulls)."""
    maps = [m for m in (bitmap(c) for c in cols) if m is not None]
    if not maps:
        return b"\xff" * ((n + 7) // 8)
    acc = np.frombuffer(maps[0], np.uint8).copy()
    for m in maps[1:]:
        acc &= np.frombuffer(m, np.uint8)
    return acc.tobytes()


def column_buffers(col: pa.Array, kind: ArgType) -> list[tuple[Any, int]]:
    """The ABI buffers of one argument's chunk: (an address or bytes, size) or (None, 0)."""
    n = len(col)
    bufs = col.buffers()
    valid = bitmap(col)
    validity: tuple[Any, int] = (valid, len(valid)) if valid is not None else (None, 0)
    if kind is ArgType.UTF8:
        offsets = np.frombuffer(bufs[1], np.int32, count=n + 1, offset=4 * col.offset)
        first, last = int(offsets[0]), int(offsets[-1])
        rebased = (offsets - first).astype(np.int32).tobytes()
        data: tuple[Any, int] = (
            (bufs[2].address + first, last - first) if last > first else (b"\0", 1)
        )
        return [(rebased, len(rebased)), data, validity]
    return [(bufs[1].address + 8 * col.offset, 8 * n), validity]
