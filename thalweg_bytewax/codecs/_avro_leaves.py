"""Private: Avro's leaf types written for a whole column at once.

``boolean`` and ``float``/``double`` from the Arrow buffers, ``int`` and ``long`` as
zigzag varints from numpy (dates, times and timestamps by their logical type), ``bytes``
and ``string`` as a varint length joined to the bytes (decimals by their logical type),
``fixed`` checked for its size and ``enum`` as the symbol's index. Each raises
:class:`~thalweg_bytewax.codecs.base.EncodeError` naming the field path and batch row of
the first value that does not fit. :data:`LEAF_WRITERS` maps an Avro type to its writer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs._avro_scalars import (
    fail,
    first_bad,
    first_cast,
    ints,
    write_decimal,
)
from thalweg_bytewax.codecs._wire import fixed_width, join, zigzag
from thalweg_bytewax.codecs.base import EncodeError

__all__ = ["LEAF_WRITERS"]

_TS_UNITS = {
    "timestamp-millis": "ms",
    "timestamp-micros": "us",
    "local-timestamp-millis": "ms",
    "local-timestamp-micros": "us",
}


def write_long(node: Mapping[str, Any], arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
    """An Avro ``long`` per row: zigzag varints (timestamps and times by their logical type)."""
    logical = node.get("logicalType")
    if pa.types.is_timestamp(arr.type) and logical in _TS_UNITS:
        arr = arr.cast(pa.timestamp(_TS_UNITS[logical], arr.type.tz), safe=True)
        arr = arr.view(pa.int64())
    elif pa.types.is_time64(arr.type) and logical == "time-micros":
        arr = arr.cast(pa.time64("us")).view(pa.int64())
    elif pa.types.is_timestamp(arr.type) or pa.types.is_time(arr.type):
        arr = arr.view(pa.int64()) if arr.type.bit_width == 64 else arr.view(pa.int32())  # noqa: PLR2004
    return zigzag(ints(arr, pa.int64(), path, rows))


def write_int(node: Mapping[str, Any], arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
    """An Avro ``int`` per row: zigzag varints (dates and millisecond times as their ints)."""
    if pa.types.is_date32(arr.type):
        arr = arr.view(pa.int32())
    elif pa.types.is_time32(arr.type):
        arr = arr.cast(pa.time32("ms")).view(pa.int32())
    return zigzag(ints(arr, pa.int32(), path, rows))


def write_float(node: Mapping[str, Any], arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
    """An Avro ``float`` or ``double`` per row: 4 or 8 little-endian bytes."""
    wide = node["type"] == "double"
    target = pa.float64() if wide else pa.float32()
    vals = ints(arr, target, path, rows)
    return fixed_width(vals.astype("<f8" if wide else "<f4", copy=False), 8 if wide else 4)


def write_bool(node: Mapping[str, Any], arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
    """An Avro ``boolean`` per row: one byte."""
    vals = ints(arr, pa.bool_(), path, rows)
    return fixed_width(vals.astype(np.uint8), 1)


def write_bytes(node: Mapping[str, Any], arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
    """Avro ``bytes`` per row: a varint length and the bytes (a decimal by its logical type)."""
    if node.get("logicalType") == "decimal" and not pa.types.is_binary(arr.type):
        return write_decimal(arr, node, path, rows)
    target = pa.binary()
    if arr.type != target:
        try:
            arr = arr.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise first_bad(arr, target, path, rows, str(exc)) from exc
    lengths = np.asarray(pc.binary_length(arr).to_numpy(zero_copy_only=False), np.int64)
    return join([zigzag(lengths), arr])


def write_string(node: Mapping[str, Any], arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
    """An Avro ``string`` per row: a varint length and the UTF-8 bytes."""
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        if pa.types.is_binary(arr.type):
            msg = (
                f"avro encoder: column `{path}`: expected text for Avro `string`; got "
                f"`binary`; decode it to text or use Avro `bytes`"
            )
            raise EncodeError(msg, column=path)
        arr = first_cast(arr, pa.string(), path, rows)
    return write_bytes({"type": "bytes"}, arr, path, rows)


def write_fixed(node: Mapping[str, Any], arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
    """An Avro ``fixed`` per row: exactly its size in bytes (a decimal by its logical type)."""
    size = int(node["size"])
    if node.get("logicalType") == "decimal" and pa.types.is_decimal(arr.type):
        return write_decimal(arr, node, path, rows)
    if arr.type != pa.binary(size):
        lengths = np.asarray(pc.binary_length(arr).to_numpy(zero_copy_only=False))
        bad = np.flatnonzero(lengths != size)
        if len(bad):
            raise fail(
                path,
                rows,
                int(bad[0]),
                f"expected {size} bytes for fixed `{node['name']}`; got {lengths[bad[0]]}",
            )
        return arr.cast(pa.binary())
    return arr.cast(pa.binary())


def write_enum(node: Mapping[str, Any], arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
    """An Avro ``enum`` per row: the symbol's index as a zigzag varint."""
    symbols = pa.array(node["symbols"], pa.string())
    index = pc.index_in(arr.cast(pa.string()), value_set=symbols)
    if index.null_count:
        valid = np.asarray(index.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        i = int(np.flatnonzero(~valid)[0])
        raise fail(
            path, rows, i, f"expected a symbol of enum `{node['name']}`; got {arr[i].as_py()!r}"
        )
    return zigzag(np.asarray(index.to_numpy(zero_copy_only=False), np.int64))


LEAF_WRITERS: Mapping[str, Callable[[Mapping[str, Any], pa.Array, str, np.ndarray], pa.Array]] = {
    "boolean": write_bool,
    "int": write_int,
    "long": write_long,
    "float": write_float,
    "double": write_float,
    "bytes": write_bytes,
    "string": write_string,
    "fixed": write_fixed,
    "enum": write_enum,
}
"""The writer of each Avro leaf type: ``(schema node, column, field path, batch rows)``."""
