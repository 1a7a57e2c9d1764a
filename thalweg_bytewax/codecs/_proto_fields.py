"""Private: a Protobuf field as the columnar writer sees it.

Its wire type and tag, the Arrow type its values are cast to (:data:`_ARROW`), the
well-known wrapper types, the values cast with the row that does not fit named, which
rows differ from the proto3 default, and enum symbols turned back into their numbers.
:mod:`._proto_write` writes messages with these (its private names, shared like
:mod:`._avro_resolve`'s).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import FieldDescriptor

from thalweg_bytewax.codecs._encode_errors import type_error, value_error
from thalweg_bytewax.codecs._wire import varint

F = FieldDescriptor
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_WIRE = {
    F.TYPE_DOUBLE: _I64, F.TYPE_FIXED64: _I64, F.TYPE_SFIXED64: _I64,
    F.TYPE_FLOAT: _I32, F.TYPE_FIXED32: _I32, F.TYPE_SFIXED32: _I32,
    F.TYPE_STRING: _LEN, F.TYPE_BYTES: _LEN, F.TYPE_MESSAGE: _LEN,
}  # fmt: skip
_ARROW = {
    F.TYPE_DOUBLE: pa.float64(), F.TYPE_FLOAT: pa.float32(),
    F.TYPE_INT64: pa.int64(), F.TYPE_SINT64: pa.int64(), F.TYPE_SFIXED64: pa.int64(),
    F.TYPE_UINT64: pa.uint64(), F.TYPE_FIXED64: pa.uint64(),
    F.TYPE_INT32: pa.int32(), F.TYPE_SINT32: pa.int32(), F.TYPE_SFIXED32: pa.int32(),
    F.TYPE_UINT32: pa.uint32(), F.TYPE_FIXED32: pa.uint32(), F.TYPE_BOOL: pa.bool_(),
}  # fmt: skip
_WRAPPERS = frozenset(
    f"google.protobuf.{n}Value"
    for n in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)
_US = 1_000_000


def _tag(fd: FieldDescriptor, wire: int) -> bytes:
    return varint((fd.number << 3) | wire)


_fail = partial(value_error, "protobuf encoder")
_wrong = partial(type_error, "protobuf encoder")


def _mask(arr: pa.Array) -> np.ndarray:
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=bool)


def _cast(arr: pa.Array, target: pa.DataType, path: str, rows: np.ndarray) -> pa.Array:
    if arr.type == target:
        return arr
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        for i in range(len(arr)):
            try:
                arr.slice(i, 1).cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                raise _fail(
                    path, rows, i, f"expected a value of `{target}`; got {arr[i].as_py()!r}"
                ) from exc
        raise _wrong(path, f"`{target}`", arr) from exc


def _lengths(arr: pa.Array) -> np.ndarray:
    return np.asarray(pc.binary_length(arr).to_numpy(zero_copy_only=False), np.int64)


def _not_default(fd: FieldDescriptor, enc: pa.Array) -> np.ndarray:
    """Rows whose wire value is not the proto3 default (those are left out, as upb does)."""
    bufs = enc.buffers()
    o, n = enc.offset, len(enc)
    offs = np.frombuffer(bufs[1], np.int32)[o : o + n + 1]
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    wire = _WIRE.get(fd.type, _VARINT)
    if wire in (_I64, _I32):  # fixed width: an all-zero bit pattern (-0.0 is written)
        width = 8 if wire == _I64 else 4
        return np.asarray(data[offs[0] : offs[-1]].reshape(-1, width).any(axis=1), dtype=bool)
    # A varint is zero iff it is the one byte 0; so is a zero length prefix.
    if not n:
        return np.zeros(0, bool)
    return np.asarray((np.diff(offs) > 1) | (data[offs[:-1]] != 0), dtype=bool)


def _enum_numbers(fd: FieldDescriptor, arr: pa.Array, path: str, rows: np.ndarray) -> np.ndarray:
    """Enum symbols (or the decoder's number text for unknown values) to numbers."""
    enum = fd.enum_type
    assert enum is not None  # an enum field always has its type
    values = enum.values
    names = pa.array([v.name for v in values], pa.string())
    numbers = np.array([v.number for v in values], np.int64)
    text = _cast(arr, pa.string(), path, rows)
    index = pc.index_in(text, value_set=names)
    out = np.zeros(len(arr), np.int64)
    found = _mask(index.is_valid())
    out[found] = numbers[
        np.asarray(index.filter(pa.array(found)).to_numpy(zero_copy_only=False), np.int64)
    ]
    if not found.all():
        missing = np.flatnonzero(~found)
        bad = text[int(missing[0])].as_py()
        try:
            nums = text.filter(pa.array(~found)).cast(pa.int32())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise _fail(
                path,
                rows,
                int(missing[0]),
                f"expected a symbol of enum `{enum.full_name}`; got {bad!r}",
            ) from exc
        if getattr(enum, "is_closed", False):
            raise _fail(
                path,
                rows,
                int(missing[0]),
                f"closed enum `{enum.full_name}` has no number {bad}",
            )
        out[missing] = np.asarray(nums.to_numpy(zero_copy_only=False), np.int64)
    return out
