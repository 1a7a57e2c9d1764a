"""The native JSON reader: plans from Arrow types, Arrow arrays from its buffers.

Private to :mod:`thalweg_bytewax.codecs.json`. The C extension ``_json_native`` parses a
batch of documents straight into Arrow buffers; this module describes the wire schema
to it (a *plan*) and assembles the arrays it returns. Rows the reader sets aside are
decided by the codec's per-value path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from typing_extensions import Buffer

from thalweg_bytewax.codecs._json_values import numpy_dtype

try:
    from thalweg_bytewax.codecs import _json_native
except ImportError:  # built without a C compiler: the codec falls back to pyarrow.json
    _json_native = None  # type: ignore[assignment]

__all__ = ["DEFERRED", "NATIVE", "READ", "NativeReader", "syntax_texts"]

NATIVE = _json_native is not None
"""Whether the native reader was built with the package."""

READ = 0
"""A row's status: read into the batch."""
DEFERRED = 1
"""A row's status: set aside for the per-value path."""
# The other statuses are rows that are no JSON document, each with the syntax error
# orjson (the per-value path) reports for it; the reader returns its position.
_SYNTAX = {
    4: "unexpected end of data",
    5: "str is not valid UTF-8: surrogates not allowed",
    6: "unexpected character, expected a JSON value",
    7: "unexpected content after document",
    8: "Input is a zero-length, empty document",
    9: "input data is empty",
}


def syntax_texts(status: np.ndarray, where: np.ndarray) -> list[str]:
    """The per-value path's texts for rows the reader rejected (``status`` > DEFERRED).

    ``orjson.JSONDecodeError`` words each as ``msg: line L column C (char N)``; one
    template per status, filled with the positions the reader returned.
    """
    heads = {k: f"json payload is malformed: {v}: line " for k, v in _SYNTAX.items()}
    return [
        f"{heads[code]}{line} column {column} (char {char})"
        for code, (line, column, char) in zip(status.tolist(), where.tolist(), strict=True)
    ]


# Plan node kinds, as the C reader numbers them.
_NULL, _BOOL, _INT, _FLOAT, _STRING, _LIST, _STRUCT, _MAP = range(8)
_INT64_MAX = (1 << 63) - 1

Tree = tuple[int, int, Buffer | None, Buffer | None, Buffer | None, tuple[Any, ...]]
"""One node of the reader's output: length, nulls, validity, data, offsets, children.

The buffers are the reader's own memory, wrapped by the arrays without a copy.
"""


class Unsupported(Exception):
    """A type the native reader does not fill (the codec keeps its other path)."""


def _plan(t: pa.DataType, strict: bool) -> tuple[tuple[Any, ...], pa.DataType]:
    """The reader's plan for ``t`` and the Arrow type of the arrays it returns."""
    if pa.types.is_null(t):
        return (_NULL,), pa.null()
    if pa.types.is_boolean(t):
        return (_BOOL,), pa.bool_()
    if pa.types.is_integer(t):
        info = np.iinfo(numpy_dtype(t))
        return (_INT, int(info.min), min(int(info.max), _INT64_MAX)), pa.int64()
    if pa.types.is_float32(t) or pa.types.is_float64(t):
        return (_FLOAT,), pa.float64()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return (_STRING,), pa.string()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item, item_type = _plan(t.value_type, strict)
        # The required check after the reader walks lists, not large lists: below
        # one, a null sets the row aside (as below a map).
        unchecked = pa.types.is_large_list(t)
        return (_LIST, item, unchecked), pa.list_(pa.field(t.value_field.name, item_type))
    if pa.types.is_map(t) and (pa.types.is_string(t.key_type)):
        item, item_type = _plan(t.item_type, strict)
        return (_MAP, item), pa.map_(pa.string(), item_type)
    if pa.types.is_struct(t):
        return _struct_plan(list(t), strict, top=False)
    raise Unsupported(str(t))


def _struct_plan(
    fields: list[pa.Field], strict: bool, *, top: bool
) -> tuple[tuple[Any, ...], pa.DataType]:
    plans = [_plan(f.type, strict) for f in fields]
    names = tuple(f.name.encode() for f in fields)
    children = tuple(p for p, _ in plans)
    out = pa.struct([pa.field(f.name, t) for f, (_, t) in zip(fields, plans, strict=True)])
    return (_STRUCT, strict, top, names, children), out


def _array(t: pa.DataType, node: Tree) -> pa.Array:
    length, nulls, valid, data, offsets, children = node
    validity = None if valid is None else pa.py_buffer(valid)
    if pa.types.is_struct(t):
        kids = [_array(f.type, c) for f, c in zip(t, children, strict=True)]
        return pa.Array.from_buffers(t, length, [validity], nulls, children=kids)
    if pa.types.is_list(t):
        kid = _array(t.value_type, children[0])
        bufs = [validity, pa.py_buffer(offsets)]
        return pa.Array.from_buffers(t, length, bufs, nulls, children=[kid])
    if pa.types.is_map(t):
        keys = _array(pa.string(), children[0])
        items = _array(t.item_type, children[1])
        entries = pa.StructArray.from_arrays([keys, items], fields=[t.key_field, t.item_field])
        bufs = [validity, pa.py_buffer(offsets)]
        return pa.Array.from_buffers(t, length, bufs, nulls, children=[entries])
    if pa.types.is_string(t):
        bufs = [validity, pa.py_buffer(offsets), pa.py_buffer(data)]
        return pa.Array.from_buffers(t, length, bufs, nulls)
    if pa.types.is_null(t):
        return pa.nulls(length)
    return pa.Array.from_buffers(t, length, [validity, pa.py_buffer(data)], nulls)


class NativeReader:
    """Reads batches of JSON objects for one wire schema through the native reader.

    Args:
        wire: The schema to fill (temporal and decimal fields as strings).
        strict: Whether objects refuse fields outside the schema.
        prefix: The reserved metadata prefix: a top-level key under it sets the row aside.

    Raises:
        Unsupported: When ``wire`` holds a type the reader does not fill.
    """

    def __init__(self, wire: pa.Schema, *, strict: bool, prefix: str) -> None:
        if _json_native is None:
            msg = "the native JSON reader is not built"
            raise Unsupported(msg)
        plan, struct = _struct_plan(list(wire), strict, top=True)
        self._decoder = _json_native.Decoder(plan, prefix.encode())
        self.schema = pa.schema(list(struct))
        """The schema of the batches :meth:`read` returns (int64, float64, string...)."""
        self._struct = struct

    def read(self, bodies: pa.Array) -> tuple[pa.RecordBatch, np.ndarray, np.ndarray]:
        """Decode a binary array without nulls.

        Returns:
            The batch of the rows read (in order), each row's status (:data:`READ`,
            :data:`DEFERRED` or a syntax error for :func:`syntax_texts`) and, per row,
            the line, column and character of its syntax error (an ``(n, 3)`` array).
        """
        n = len(bodies)
        if n == 0:
            empty = pa.RecordBatch.from_pylist([], schema=self.schema)
            return empty, np.zeros(0, np.uint8), np.zeros((0, 3), np.int32)
        start = bodies.offset
        offsets = np.frombuffer(bodies.buffers()[1], np.int32)[start : start + n + 1]
        data = bodies.buffers()[2]
        status, where, tree = self._decoder.decode(
            b"" if data is None else data, np.ascontiguousarray(offsets)
        )
        whole = _array(self._struct, tree)
        batch = pa.RecordBatch.from_struct_array(whole)
        positions = np.frombuffer(where, np.int32).reshape(n, 3)
        return batch, np.frombuffer(status, np.uint8), positions
