"""Whether every value of an Arrow column is the same, cheaply.

The locator columns of a batch from one source partition repeat one topic and one
partition on every row, and every sink and span check asks whether they do, once a
batch. Arrow's ``equal`` against a scalar compares strings row by row (~35 ns a row,
a third of what a sink spends on a batch); comparing the string column's buffers
directly is an order of magnitude cheaper. :func:`int_bounds` answers the other
once-a-batch question, the lowest and highest offset, on the buffer as well.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["all_equal", "int_bounds"]

_OFFSET_TYPES: dict[pa.DataType, type[np.integer]] = {
    pa.string(): np.int32,
    pa.binary(): np.int32,
    pa.large_string(): np.int64,
    pa.large_binary(): np.int64,
}


def all_equal(array: pa.Array) -> bool:
    """Whether every value of ``array`` equals its first (True for 0 or 1 values).

    A null makes the values unequal unless every value is null.
    """
    n = len(array)
    if n <= 1:
        return True
    if array.null_count:
        return bool(array.null_count == n)
    offset_type = _OFFSET_TYPES.get(array.type)
    if offset_type is not None:
        return _strings_all_equal(array, offset_type)
    if pa.types.is_integer(array.type):
        values = _int_values(array)
        return bool((values == values[0]).all())
    return bool(pc.all(pc.equal(array, array[0])).as_py())


def int_bounds(array: pa.Array) -> tuple[int, int]:
    """The lowest and highest value of a non-empty integer column without nulls.

    Read on the values buffer: a compute call costs several times more on the
    10k-row batches a sink checks once each. Other arrays go through Arrow's
    ``min_max``.

    Raises:
        ValueError: When ``array`` is empty or all null (no bounds).
    """
    if len(array) and not array.null_count and pa.types.is_integer(array.type):
        values = _int_values(array)
        return int(values.min()), int(values.max())
    bounds = pc.min_max(array)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None or high is None:
        msg = f"int_bounds: expected a column with a non-null value; got {len(array)} rows"
        raise ValueError(msg)
    return int(low), int(high)


# Spelled out: `DataType.to_pandas_dtype` imports pandas, which a plain install lacks.
_INT_TYPES: dict[pa.DataType, np.dtype[np.integer]] = {
    pa.int8(): np.dtype(np.int8),
    pa.int16(): np.dtype(np.int16),
    pa.int32(): np.dtype(np.int32),
    pa.int64(): np.dtype(np.int64),
    pa.uint8(): np.dtype(np.uint8),
    pa.uint16(): np.dtype(np.uint16),
    pa.uint32(): np.dtype(np.uint32),
    pa.uint64(): np.dtype(np.uint64),
}


def _int_values(array: pa.Array) -> np.ndarray:
    """The values of an integer array without nulls, as a view of its buffer."""
    dtype = _INT_TYPES[array.type]
    return np.frombuffer(
        array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize
    )


def _strings_all_equal(array: pa.Array, offset_type: type[np.integer]) -> bool:
    """``all_equal`` for a string or binary array without nulls, on its buffers."""
    n = len(array)
    _, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[array.offset : array.offset + n + 1]
    lengths = np.diff(offsets)
    width = int(lengths[0])
    if not (lengths == width).all():
        return False
    if width == 0:
        return True
    # Every value equals the first iff the bytes equal themselves shifted by one value:
    # one memcmp of two zero-copy slices.
    start, size = int(offsets[0]), width * (n - 1)
    return bool(data_buffer.slice(start, size).equals(data_buffer.slice(start + width, size)))
