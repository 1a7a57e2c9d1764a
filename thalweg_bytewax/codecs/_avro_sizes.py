"""The Avro encoded size of every row, recomputed from its decoded Arrow columns (vectorised).

The fast path proves each record's boundaries with it: a row decoded from exactly its
own bytes re-encodes to exactly its body length.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs._avro_types import AvroNode

__all__ = [
    "binary_lengths",
    "decimal_nbytes",
    "int_values",
    "record_sizes",
    "value_sizes",
    "zz_size",
]

_DECIMAL_LIMITS = np.array([1 << (8 * k - 1) for k in range(1, 8)], dtype=np.int64)
"""The smallest magnitude needing k + 1 two's-complement bytes, for k = 1..7."""

_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)
"""The smallest zigzag value needing k + 2 varint bytes, for k = 0..8."""


def zz_size(values: np.ndarray) -> npt.NDArray[np.int64]:
    """The zigzag varint size in bytes of each of ``values``."""
    v = np.asarray(values, dtype=np.int64)  # no copy for int64 input
    n = len(v)
    if not n:
        return np.ones(0, dtype=np.int64)
    # Most columns take one size for every row: lengths and counts under 64, and
    # longs such as timestamps of one era. The extremes of the zigzag values bound
    # every row's size, so such a column is one fill, without a per-row pass.
    lo, hi = int(v.min()), int(v.max())
    if lo >= -64 and hi < 64:
        return np.ones(n, dtype=np.int64)
    z = ((v << 1) ^ (v >> 63)).view(np.uint64)
    smallest = int(np.searchsorted(_VARINT_LIMITS, z.min(), side="right"))
    reached = int(np.searchsorted(_VARINT_LIMITS, z.max(), side="right"))
    if smallest == reached:
        return np.full(n, 1 + reached, dtype=np.int64)
    if reached - smallest > 2:  # wide values: one search
        return 1 + np.searchsorted(_VARINT_LIMITS, z, side="right")
    # Compare only against the limits between the extremes (one pass each).
    size = np.full(n, 1 + smallest, dtype=np.int64)
    for limit in _VARINT_LIMITS[smallest:reached]:
        size += z >= limit
    return size


def int_values(arr: pa.Array, as_type: pa.DataType) -> np.ndarray:
    """``arr`` as integers of ``as_type`` in numpy, nulls as 0 (a view when it can be)."""
    if arr.null_count == 0 and arr.type == as_type:  # the usual column: a view
        view: np.ndarray = arr.to_numpy(zero_copy_only=False)
        return view
    values: np.ndarray = pc.fill_null(arr.cast(as_type), 0).to_numpy(zero_copy_only=False)
    return values


def binary_lengths(arr: pa.Array) -> npt.NDArray[np.int64]:
    """The byte length of each value of a string or binary ``arr`` (0 for a null)."""
    if arr.null_count:
        return int_values(pc.binary_length(arr), pa.int64())
    # straight from the offsets buffer
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)
    lengths: npt.NDArray[np.int64] = np.diff(offsets[arr.offset : arr.offset + len(arr) + 1])
    return lengths.astype(np.int64)


def decimal_nbytes(arr: pa.Array) -> npt.NDArray[np.int64]:
    """The fewest two's-complement bytes of each unscaled value of a decimal128 ``arr``.

    Only the low 64 bits are read: the fast path keeps decimals of up to 18 digits.
    """
    n = len(arr)
    raw = np.frombuffer(arr.buffers()[1], dtype=np.int64)[2 * arr.offset : 2 * (arr.offset + n)]
    unscaled = raw[0::2]
    # v needs k + 1 bytes when |v| (as ~v for negatives) reaches 2^(8k - 1); one search
    # over the seven limits.
    magnitude = np.where(unscaled < 0, ~unscaled, unscaled)
    nbytes: npt.NDArray[np.int64] = 1 + np.searchsorted(
        _DECIMAL_LIMITS, magnitude, side="right"
    ).astype(np.int64)
    return nbytes


def record_sizes(arrays: list[pa.Array], node: AvroNode) -> np.ndarray:
    """The encoded size of each row of a record's field ``arrays``."""
    n = len(arrays[0]) if arrays else 0
    total = np.zeros(n, dtype=np.int64)
    for arr, child in zip(arrays, node.children, strict=False):
        total += value_sizes(arr, child)
    return total


def value_sizes(arr: pa.Array, node: AvroNode) -> np.ndarray:  # noqa: PLR0911 - one case per type
    """The encoded size of each value of ``arr``, written as ``node``."""
    t = node.arrow
    kind = node.kind
    n = len(arr)
    if kind == "nullable":
        inner = value_sizes(arr, node.children[0])
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        return 1 + np.where(valid, inner, 0)
    if kind == "record":
        return record_sizes([arr.field(i) for i in range(arr.type.num_fields)], node)
    if kind == "array":
        offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        values = arr.values
        child = value_sizes(values, node.children[0]) if len(values) else np.zeros(0, np.int64)
        cs = np.concatenate([[0], np.cumsum(child)])
        sums = cs[offsets[1:]] - cs[offsets[:-1]]
        counts = np.diff(offsets)
        return np.where(counts > 0, zz_size(counts) + sums + 1, 1)
    if kind == "enum":
        idx = pc.index_in(arr, value_set=pa.array(node.symbols, pa.string()))
        return zz_size(int_values(idx, pa.int64()))
    if kind == "fixed" or (kind == "decimal" and node.size):
        return np.full(n, node.size, dtype=np.int64)
    if kind == "decimal":
        nbytes = decimal_nbytes(arr)
        return zz_size(nbytes) + nbytes
    if pa.types.is_boolean(t):
        return np.ones(n, dtype=np.int64)
    if pa.types.is_float32(t):
        return np.full(n, 4, dtype=np.int64)
    if pa.types.is_float64(t):
        return np.full(n, 8, dtype=np.int64)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        lengths = binary_lengths(arr)
        return zz_size(lengths) + lengths
    if pa.types.is_int32(t) or pa.types.is_date32(t) or pa.types.is_time32(t):
        return zz_size(int_values(arr, pa.int32()))
    if pa.types.is_int64(t) or pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return zz_size(int_values(arr, pa.int64()))
    msg = f"no size rule for {t}"
    raise TypeError(msg)
