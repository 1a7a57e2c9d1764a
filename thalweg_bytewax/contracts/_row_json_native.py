"""The native row JSON writer: a plan of Arrow buffer addresses the C extension writes from.

Columns of a type the writer has no spelling for are rendered by the column-wise path
first and copied in as text; a value it cannot spell makes it answer ``None``, and the
caller falls back to the column-wise path for the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from thalweg_bytewax.contracts._row_json_columns import MAX_PLAIN_SCALE, UTC_ZONES, fragments

try:
    from thalweg_bytewax.contracts import _native
except ImportError:  # built without a C compiler: the callers take the column-wise path
    _native = None  # type: ignore[assignment]

__all__ = ["concat_text", "native_rows"]

_STR = pa.string()

(
    _K_NULL,
    _K_BOOL,
    _K_INT,
    _K_UINT,
    _K_DECIMAL,
    _K_STRING,
    _K_LARGE_STRING,
    _K_RAW,
    _K_BINARY,
    _K_LARGE_BINARY,
    _K_FIXED_BINARY,
    _K_TIMESTAMP,
    _K_DATE32,
    _K_LIST,
    _K_LARGE_LIST,
    _K_FIXED_LIST,
    _K_STRUCT,
    _K_MAP,
    _K_DICT,
    _K_DATE64,
) = range(20)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000}

Node = tuple[int, int, int, int, int, int, int, int, tuple[Any, ...], tuple[bytes, ...]]
_MAX_TEXT = 2**31 - 1
# Bytes of text per row expected, from the last batch (the first data buffer's size).
_size_hint = [256.0]
_concat_hint = [64.0]


def native_rows(batch: pa.RecordBatch, index: np.ndarray | None) -> pa.Array | None:
    """The rows through the C writer, or ``None`` where it spells a value differently."""
    keep: list[Any] = [batch, index]
    children: list[Node] = []
    for i in range(batch.num_columns):
        col = batch.column(i)
        node, raw = _node(col, keep)
        if raw and index is not None:
            # Fragments are rendered for a whole column: render only the rows asked for.
            col = col.take(pa.array(index, pa.int64()))
            keep.append(col)
            node, _ = _node(col, keep, taken=1)
        children.append(node)
    keys = tuple(orjson.dumps(name) + b":" for name in batch.schema.names)
    root: Node = (_K_STRUCT, 0, 0, 0, 0, 0, 0, 0, tuple(children), keys)
    n = batch.num_rows if index is None else len(index)
    return _write(root, index, n, _size_hint, keep)


def _write(
    root: Node, index: np.ndarray | None, n: int, hint: list[float], keep: list[Any]
) -> pa.Array | None:
    """``n`` rows of ``root`` through the C writer (``keep`` holds what the plan points at).

    The text buffer starts at ``hint[0]`` bytes per row (the last call's size plus a
    quarter) and doubles while a row does not fit. It comes from ``malloc``, not Arrow's
    pool: blocks that large go back to the OS when Arrow's mimalloc frees them, and
    every batch would fault fresh zeroed pages in again; malloc keeps them for reuse.
    """
    assert _native is not None  # noqa: S101 - the callers checked
    address = 0 if index is None or not len(index) else int(index.ctypes.data)
    offsets = pa.allocate_buffer(4 * (n + 1))
    capacity = min(int(n * hint[0]) + 1024, _MAX_TEXT)
    data = _native.Block(capacity)
    done = 0
    while True:
        reached = _native.rows(root, address, n, done, offsets.address, data.address, capacity)
        if reached is None:
            return None
        if reached == n:
            break
        if capacity == _MAX_TEXT:
            return None  # past 2 GiB of text: the column-wise path says what it does
        capacity = min(2 * capacity, _MAX_TEXT)
        data.resize(capacity)
        done = reached
    del keep
    used = int(np.frombuffer(offsets, np.int32)[n])
    if n:
        hint[0] = 1.25 * used / n
    data.resize(used)
    return pa.StringArray.from_buffers(n, offsets, pa.py_buffer(data))


def concat_text(
    parts: Sequence[tuple[str, pa.Array, np.ndarray | None]], n: int
) -> pa.Array | None:
    """Per row, each part's literal followed by its array's value as text, all joined.

    A column-wise ``binary_join_element_wise`` of literals and columns in one pass of the
    native writer (DLQ messages use it: ``topic:partition@offset: ...``).

    Args:
        parts: ``(literal, values, rows)``: ``values`` a ``string`` or integer array,
            ``rows`` the element of it for each output row (``None``: row ``i`` is
            element ``i``).
        n: Rows of output.

    Returns:
        A non-null ``string`` array of ``n`` rows, or ``None`` when the native writer is
        not built or a part has nulls or another type (the caller joins with Arrow).
    """
    if _native is None:
        return None
    keep: list[Any] = []
    children: list[Node] = []
    for _, values, rows in parts:
        t = values.type
        if values.null_count or not (pa.types.is_string(t) or pa.types.is_integer(t)):
            return None
        bufs = values.buffers()
        if pa.types.is_string(t):
            node: Node = (
                _K_RAW,
                0,
                values.offset,
                0,
                _address(bufs[1]),
                _address(bufs[2]),
                0,
                0,
                (),
                (),
            )
        else:
            kind = _K_INT if pa.types.is_signed_integer(t) else _K_UINT
            node = (kind, 0, values.offset, 0, _address(bufs[1]), 0, t.bit_width // 8, 0, (), ())
        keep.append(values)
        if rows is not None:
            index = np.ascontiguousarray(rows, dtype=np.int64)
            if len(index) != n or (n and (index.min() < 0 or index.max() >= len(values))):
                msg = (
                    f"concat_text: a part's rows must be {n} indices into its {len(values)} values"
                )
                raise IndexError(msg)
            keep.append(index)
            address = int(index.ctypes.data) if n else 0
            node = (_K_DICT, 1, 0, 0, address, 0, 8, len(values), (node,), ())
        elif len(values) != n:
            msg = f"concat_text: a part without rows must have {n} values, not {len(values)}"
            raise IndexError(msg)
        else:
            node = (node[0], 1, *node[2:])
        children.append(node)
    keys = tuple(literal.encode() for literal, _, _ in parts)
    root: Node = (_K_STRUCT, 0, 0, 0, 0, 0, 1, 0, tuple(children), keys)
    return _write(root, None, n, _concat_hint, keep)


def _address(buf: pa.Buffer | None) -> int:
    return 0 if buf is None else int(buf.address)


def _node(arr: pa.Array, keep: list[Any], taken: int = 0) -> tuple[Node, bool]:  # noqa: C901, PLR0911, PLR0912
    """The plan node of ``arr`` and whether it (or a child) holds rendered fragments."""
    t = arr.type
    bufs = arr.buffers()
    valid = _address(bufs[0]) if arr.null_count else 0
    off = arr.offset

    def leaf(kind: int, b1: int, b2: int = 0, param: int = 0, param2: int = 0) -> Node:
        return (kind, taken, off, valid, b1, b2, param, param2, (), ())

    if pa.types.is_null(t):
        return leaf(_K_NULL, 0), False
    if pa.types.is_boolean(t):
        return leaf(_K_BOOL, _address(bufs[1])), False
    if pa.types.is_integer(t):
        kind = _K_INT if pa.types.is_signed_integer(t) else _K_UINT
        return leaf(kind, _address(bufs[1]), param=t.bit_width // 8), False
    if pa.types.is_decimal128(t) and 0 <= t.scale <= MAX_PLAIN_SCALE:
        return leaf(_K_DECIMAL, _address(bufs[1]), param=t.scale), False
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        kind = _K_STRING if pa.types.is_string(t) else _K_LARGE_STRING
        return leaf(kind, _address(bufs[1]), _address(bufs[2])), False
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        kind = _K_BINARY if pa.types.is_binary(t) else _K_LARGE_BINARY
        return leaf(kind, _address(bufs[1]), _address(bufs[2])), False
    if pa.types.is_fixed_size_binary(t):
        return leaf(_K_FIXED_BINARY, _address(bufs[1]), param=t.byte_width), False
    if pa.types.is_timestamp(t) and t.unit in _PER_SECOND and (t.tz is None or t.tz in UTC_ZONES):
        tz = int(t.tz is not None)
        return leaf(_K_TIMESTAMP, _address(bufs[1]), param=_PER_SECOND[t.unit], param2=tz), False
    if pa.types.is_date32(t):
        return leaf(_K_DATE32, _address(bufs[1])), False
    if pa.types.is_date64(t):
        return leaf(_K_DATE64, _address(bufs[1])), False
    if pa.types.is_dictionary(t):
        width = t.index_type.bit_width // 8 + (
            0 if pa.types.is_signed_integer(t.index_type) else 10
        )
        values, raw = _node(arr.dictionary, keep)
        size = len(arr.dictionary)
        return (_K_DICT, taken, off, valid, _address(bufs[1]), 0, width, size, (values,), ()), raw
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        child, raw = _node(arr.values, keep)
        if pa.types.is_fixed_size_list(t):
            kind, param = _K_FIXED_LIST, t.list_size
        else:
            kind, param = (_K_LIST if pa.types.is_list(t) else _K_LARGE_LIST), 0
        return (kind, taken, off, valid, _address(bufs[1]), 0, param, 0, (child,), ()), raw
    if pa.types.is_map(t):
        keys, raw_keys = _node(arr.keys, keep)
        items, raw_items = _node(arr.items, keep)
        entries: Node = (_K_MAP, taken, off, valid, _address(bufs[1]), 0, 0, 0, (keys, items), ())
        return entries, raw_keys or raw_items
    if pa.types.is_struct(t):
        names = [t.field(i).name for i in range(t.num_fields)]
        if len(set(names)) == len(names):
            # Under a null struct a child's slot may hold anything: flattened, it is null
            # there, as the column-wise path sees it.
            kids_arrays = (
                arr.flatten() if arr.null_count else [arr.field(i) for i in range(t.num_fields)]
            )
            keep.extend(kids_arrays)
            fields = [_node(kid, keep) for kid in kids_arrays]
            labels = tuple(orjson.dumps(name) + b":" for name in names)
            kids = tuple(f[0] for f in fields)
            struct: Node = (_K_STRUCT, taken, off, valid, 0, 0, 0, 0, kids, labels)
            return struct, any(f[1] for f in fields)
    # No spelling in the writer: the column-wise path renders the fragments.
    text = fragments(arr)
    if text.type != _STR:
        text = text.cast(_STR)
    keep.append(text)
    tb = text.buffers()
    return (_K_RAW, taken, text.offset, 0, _address(tb[1]), _address(tb[2]), 0, 0, (), ()), True
