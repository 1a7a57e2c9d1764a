"""Rows whose key already occurred earlier in a batch: the mask of ``unique`` rules and dedup.

A one-column key is hashed by the native extension when it is built; other keys, and
every key without it, are grouped with Arrow. Nothing loops over rows in Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

try:
    from thalweg_bytewax.contracts import _native
except ImportError:  # built without a C compiler: keys are grouped with Arrow
    _native = None  # type: ignore[assignment]

__all__ = ["duplicate_mask"]


def duplicate_mask(batch: pa.RecordBatch, cols: Sequence[str]) -> np.ndarray:
    """Rows whose key already occurred earlier in the batch (rows with a null key never).

    A one-column key of strings, bytes, integers, decimals, dates or instants is hashed
    by the native extension when it is built (equal values are equal bytes there);
    other keys, and every key without it, are grouped with Arrow.
    """
    if len(cols) == 1:
        found = _native_duplicates(batch.column(cols[0]))
        if found is not None:
            return found
    return _grouped_duplicates(batch, cols)


def _native_duplicates(col: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """:func:`duplicate_mask` of one column by the native hash, or ``None`` (no such path)."""
    if _native is None:
        return None
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    t = col.type
    bufs = col.buffers()
    if t.id in _VARIABLE:
        kind, width = _VARIABLE[t.id], 0
    elif _fixed_width(t):
        kind, width = 0, t.bit_width // 8
    else:
        return None
    out = np.empty(len(col), dtype=bool)
    if not len(col):
        return out

    def address(buf: pa.Buffer | None) -> int:
        return 0 if buf is None else int(buf.address)

    valid = address(bufs[0]) if col.null_count else 0
    data = address(bufs[2]) if kind else 0
    _native.duplicates(
        kind, len(col), col.offset, valid, address(bufs[1]), data, width, out.ctypes.data
    )
    return out


# Arrow type ids of variable-width binary keys: 1 for 32-bit offsets, 2 for 64-bit.
_VARIABLE = {
    pa.string().id: 1,
    pa.binary().id: 1,
    pa.large_string().id: 2,
    pa.large_binary().id: 2,
}


def _fixed_width(t: pa.DataType) -> bool:
    """Whole-byte fixed-width types whose equal values are equal bytes (no floats)."""
    return (
        bool(
            pa.types.is_integer(t)
            or pa.types.is_fixed_size_binary(t)
            or pa.types.is_decimal(t)
            or pa.types.is_timestamp(t)
            or pa.types.is_date(t)
            or pa.types.is_time(t)
            or pa.types.is_duration(t)
        )
        and t.bit_width % 8 == 0
    )


def _grouped_duplicates(batch: pa.RecordBatch, cols: Sequence[str]) -> np.ndarray:
    """:func:`duplicate_mask` by an Arrow group-by (any key)."""
    n = batch.num_rows
    idx_name = "__twg_row"
    table = pa.table(
        [batch.column(c) for c in cols] + [pa.array(np.arange(n))], names=[*cols, idx_name]
    )
    firsts = table.group_by(list(cols), use_threads=False).aggregate([(idx_name, "min")])
    first = np.zeros(n, dtype=bool)
    first[firsts.column(f"{idx_name}_min").to_numpy()] = True
    dup = ~first
    for c in cols:
        col = batch.column(c)
        if col.null_count:
            dup &= ~np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    return dup
