"""Rows of an Arrow batch as JSON objects, column-wise: the ``row_json`` of DLQ rows.

The text is exactly what ``orjson.dumps`` writes for the row as ``to_pylist`` gives it,
with two spellings JSON lacks: NaN and the infinities as the strings ``"NaN"``,
``"Infinity"`` and ``"-Infinity"`` (``null`` would hide the very value a row was
rejected for), and values orjson has no form for as their text (decimals as
``"12.50"``, bytes as hex). Each column becomes one JSON fragment per row with Arrow
string kernels (lists and maps joined per row with ``binary_join``, structs and the row
object with ``binary_join_element_wise``); no Python loop runs over rows. Types without
an exact columnar spelling here (times, durations, half floats, nanosecond or zoned
instants, decimals that ``str`` writes in exponent form, dates outside years 1-9999)
are written value by value through orjson, for that column only.

When the optional C extension ``_native`` is built, the same text is written
by it straight from the Arrow buffers of the selected rows (no ``take``, no string
kernels); columns of a type it has no spelling for (floats, times, durations, decimals
past six places, zoned or nanosecond instants, ...) are rendered by the column-wise
path first and copied in as text. A value it cannot spell (a date or instant outside
years 1-9999) sends the batch to the column-wise path. A log line says which runs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from datetime import time
from decimal import Decimal
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

try:
    from thalweg_bytewax.contracts import _native
except ImportError:  # built without a C compiler: Arrow string kernels write the same text
    _native = None  # type: ignore[assignment]

__all__ = [
    "NATIVE",
    "concat_text",
    "json_default",
    "rows_as_json",
    "spell_non_finite",
    "value_json",
]

NATIVE = _native is not None
"""Whether the native row JSON writer was built with the package."""

logger = logging.getLogger(__name__)
_announced = False

_STR = pa.string()
_NULL = pa.scalar("null", _STR)
_QUOTE = pa.scalar('"', _STR)
_UTC_ZONES = frozenset({"UTC", "Etc/UTC", "+00:00"})
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
# Decimal's str() switches to exponent form below 1e-6 (e.g. ``1E-8``); Arrow never does.
_MAX_PLAIN_SCALE = 6
_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1}
# Seconds from 0001-01-01 to the epoch, and from the epoch to 10000-01-01.
_MIN_SECONDS, _MAX_SECONDS = -62_135_596_800, 253_402_300_800


def json_default(value: Any) -> Any:
    """The ``default`` of orjson for row JSON: decimals and the rest as text, bytes as hex."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def spell_non_finite(value: Any) -> Any:
    """``value`` with NaN and infinities spelled out (``NaN``, ``Infinity``); times as ISO."""
    if isinstance(value, float):
        return value if math.isfinite(value) else _NON_FINITE[repr(value)]
    if isinstance(value, dict):
        return {k: spell_non_finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [spell_non_finite(v) for v in value]
    if isinstance(value, tuple):  # map entries
        return tuple(spell_non_finite(v) for v in value)
    if isinstance(value, time):
        # orjson 3.13 drops a leading zero of the fraction when the microseconds are
        # 10000..99999 (`01:02:03.16000` for .016000): times are spelled here instead.
        return value.isoformat()
    return value


def value_json(value: Any) -> str:
    """One Python value (as ``to_pylist`` gives it) as row-JSON text."""
    return orjson.dumps(spell_non_finite(value), default=json_default).decode()


def rows_as_json(batch: pa.RecordBatch, rows: np.ndarray | None = None) -> pa.Array:
    """One JSON object per row of ``batch``, keyed by column name, in column order.

    Args:
        batch: The rows (typically a batch's payload columns).
        rows: Only these rows (indices into ``batch``, in this order), as if ``batch``
            were taken at them first; default all.

    Returns:
        A non-null ``string`` array, one object per row (per entry of ``rows``).

    Raises:
        IndexError: When an entry of ``rows`` is not a row of ``batch``.
    """
    index = None if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
    if index is not None and len(index) and (index.min() < 0 or index.max() >= batch.num_rows):
        msg = (
            f"rows_as_json: row indices must lie in 0..{batch.num_rows - 1} (the batch's "
            f"rows), got {int(index.min())}..{int(index.max())}"
        )
        raise IndexError(msg)
    names = batch.schema.names
    unique = len(set(names)) == len(names)
    _announce()
    if unique and _native is not None:
        out = _native_rows(batch, index)
        if out is not None:
            return out
    if index is not None:
        batch = batch.take(pa.array(index, pa.int64()))
    if not unique:
        # A dict keeps one value per key: the per-row form defines what that means.
        return pa.array([value_json(r) for r in batch.to_pylist()], _STR)
    return _columnwise_rows(batch)


def _announce() -> None:
    global _announced  # noqa: PLW0603 - one log line per process
    if _announced:
        return
    _announced = True
    if _native is not None:
        logger.info("row JSON: the native writer builds DLQ row JSON from Arrow buffers")
    else:
        logger.warning(
            "row JSON: the native writer was not built (no C compiler at install); DLQ "
            "row JSON is built with Arrow string kernels (the same text, more CPU per row)"
        )


def _columnwise_rows(batch: pa.RecordBatch) -> pa.Array:
    """The column-wise path: every row of ``batch`` (unique column names)."""
    return _object(
        batch.schema.names, [batch.column(i) for i in range(batch.num_columns)], batch.num_rows
    )


# Plan node kinds, as the C writer numbers them.
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


def _native_rows(batch: pa.RecordBatch, index: np.ndarray | None) -> pa.Array | None:
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
        reached = _native.rows(
            root, address, n, done, offsets.address, data.address, capacity
        )
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
    if pa.types.is_decimal128(t) and 0 <= t.scale <= _MAX_PLAIN_SCALE:
        return leaf(_K_DECIMAL, _address(bufs[1]), param=t.scale), False
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        kind = _K_STRING if pa.types.is_string(t) else _K_LARGE_STRING
        return leaf(kind, _address(bufs[1]), _address(bufs[2])), False
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        kind = _K_BINARY if pa.types.is_binary(t) else _K_LARGE_BINARY
        return leaf(kind, _address(bufs[1]), _address(bufs[2])), False
    if pa.types.is_fixed_size_binary(t):
        return leaf(_K_FIXED_BINARY, _address(bufs[1]), param=t.byte_width), False
    if pa.types.is_timestamp(t) and t.unit in _PER_SECOND and (t.tz is None or t.tz in _UTC_ZONES):
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
    text = _fragments(arr)
    if text.type != _STR:
        text = text.cast(_STR)
    keep.append(text)
    tb = text.buffers()
    return (_K_RAW, taken, text.offset, 0, _address(tb[1]), _address(tb[2]), 0, 0, (), ()), True


def _needs_escape(arr: pa.Array) -> np.ndarray | None:
    """Per row of a ``string`` array, whether JSON escapes a byte of it; ``None``: none."""
    buffers = arr.buffers()
    if buffers[2] is None:
        return None
    offsets = np.frombuffer(buffers[1], np.int32)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(buffers[2], np.uint8)[int(offsets[0]) : int(offsets[-1])]
    bad = (data < 0x20) | (data == 0x22) | (data == 0x5C)  # noqa: PLR2004 - '"' and '\\'
    if not bad.any():
        return None
    seen = np.concatenate([[0], np.cumsum(bad, dtype=np.int64)])
    rel = offsets.astype(np.int64) - int(offsets[0])
    return np.asarray(seen[rel[1:]] > seen[rel[:-1]])


def _object(names: Sequence[str], fields: Sequence[pa.Array], n: int) -> pa.Array:
    if not names:
        return pa.repeat(pa.scalar("{}", _STR), n)
    parts: list[pa.Array | pa.Scalar] = []
    for i, (name, field) in enumerate(zip(names, fields, strict=True)):
        key = orjson.dumps(name).decode()
        parts.append(pa.scalar(("{" if i == 0 else ",") + key + ":", _STR))
        parts.append(_fragments(field))
    parts.append(pa.scalar("}", _STR))
    out = pc.binary_join_element_wise(*parts, "")
    return out if isinstance(out, pa.Array) else pa.repeat(out, n)


def _fragments(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The JSON text of every value of ``arr`` (``null`` for nulls), never null itself."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if len(arr) == 0:
        return pa.array([], _STR)
    if arr.null_count == len(arr):
        return pa.repeat(_NULL, len(arr))
    text = _columnar(arr, t)
    if text is None:
        return pa.array([value_json(v) for v in arr.to_pylist()], _STR)
    return text if not arr.null_count else pc.if_else(arr.is_null(), _NULL, text)


def _columnar(arr: pa.Array, t: pa.DataType) -> pa.Array | None:  # noqa: C901, PLR0911
    """Fragments (nulls may be anything) or ``None`` where only the per-value form is exact."""
    if pa.types.is_boolean(t) or pa.types.is_integer(t):
        return arr.cast(_STR)
    if pa.types.is_float32(t) or pa.types.is_float64(t):
        return _floats(arr)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _strings(arr.cast(_STR))
    if pa.types.is_decimal(t):
        if not 0 <= t.scale <= _MAX_PLAIN_SCALE:
            return None
        return _quoted(arr.cast(_STR))
    if pa.types.is_timestamp(t):
        return _timestamps(arr, t)
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return _dates(arr)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return _hex(arr)
    if pa.types.is_dictionary(t):
        return _fragments(arr.dictionary_decode())
    if pa.types.is_map(t):
        return _map(arr)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _list(arr, t)
    if pa.types.is_struct(t):
        names = [t.field(i).name for i in range(t.num_fields)]
        if len(set(names)) != len(names):
            return None
        return _object(names, arr.flatten(), len(arr))
    return None


def _quoted(text: pa.Array) -> pa.Array:
    out: pa.Array = pc.binary_join_element_wise(_QUOTE, text, _QUOTE, "")
    return out


def _strings(text: pa.Array) -> pa.Array:
    """JSON string literals, escaped as orjson escapes (quote, backslash, controls)."""
    mask = _needs_escape(text)
    if mask is None:
        return _quoted(text)
    sub = text.filter(pa.array(mask))
    sub = pc.replace_substring(sub, "\\", "\\\\")
    sub = pc.replace_substring(sub, '"', '\\"')
    for code in range(0x20):
        ch = chr(code)
        if pc.any(pc.match_substring(sub, ch)).as_py():
            sub = pc.replace_substring(sub, ch, _SHORT_ESCAPES.get(ch, f"\\u{code:04x}"))
    return _quoted(pc.replace_with_mask(text, pa.array(mask), sub))


def _floats(arr: pa.Array) -> pa.Array:
    """Shortest round-trip floats as orjson writes them; NaN and infinities spelled out."""
    values = np.asarray(
        arr.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False), np.float64
    )
    body = orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].decode()
    out = pc.split_pattern(pa.array([body], _STR), ",").flatten()
    finite = np.isfinite(values)
    if not finite.all():
        signed = np.where(values > 0, '"Infinity"', '"-Infinity"')
        spelled = np.where(np.isnan(values), '"NaN"', signed)
        out = pc.if_else(pa.array(finite), out, pa.array(spelled, _STR))
    return out


def _timestamps(arr: pa.Array, t: pa.TimestampType) -> pa.Array | None:
    """``"YYYY-MM-DDTHH:MM:SS[.ffffff][+00:00]"``, as orjson writes a ``datetime``."""
    if t.unit not in _MICROS or (t.tz is not None and t.tz not in _UTC_ZONES):
        return None
    raw = np.asarray(arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False))
    micros = raw * _MICROS[t.unit]
    if len(raw) and (
        raw.min() < _MIN_SECONDS * 1_000_000 // _MICROS[t.unit]
        or raw.max() >= _MAX_SECONDS * 1_000_000 // _MICROS[t.unit]
    ):
        return None
    seconds = pa.array(micros // 1_000_000, pa.timestamp("s")).cast(_STR)
    text = pc.replace_substring(seconds, " ", "T", max_replacements=1)
    frac = micros % 1_000_000
    if frac.any():
        digits = pc.utf8_slice_codeunits(pa.array(frac + 1_000_000).cast(_STR), 1)
        dotted = pc.binary_join_element_wise(pa.scalar(".", _STR), digits, "")
        text = pc.binary_join_element_wise(
            text, pc.if_else(pa.array(frac != 0), dotted, pa.scalar("", _STR)), ""
        )
    if t.tz is not None:
        text = pc.binary_join_element_wise(text, pa.scalar("+00:00", _STR), "")
    return _quoted(text)


def _dates(arr: pa.Array) -> pa.Array | None:
    days = arr.cast(pa.date32()).cast(pa.int32()).fill_null(0)
    lo, hi = _MIN_SECONDS // 86_400, _MAX_SECONDS // 86_400
    if pc.any(pc.or_(pc.less(days, lo), pc.greater_equal(days, hi))).as_py():
        return None
    return _quoted(arr.cast(pa.date32()).cast(_STR))


def _hex(arr: pa.Array) -> pa.Array:
    """Bytes as quoted lowercase hex: the hex of the value buffer, re-sliced per row."""
    n = len(arr)
    if pa.types.is_fixed_size_binary(arr.type):
        width = arr.type.byte_width
        data = arr.buffers()[1]
        start = arr.offset * width
        offsets = np.arange(n + 1, dtype=np.int64) * width
    else:
        arr = arr.cast(pa.large_binary())
        buffers = arr.buffers()
        offsets = np.frombuffer(buffers[1], np.int64)[arr.offset : arr.offset + n + 1]
        data = buffers[2]
        start = int(offsets[0])
        offsets = offsets - start
    size = int(offsets[-1])
    body = b"" if data is None or size == 0 else data.to_pybytes()[start : start + size]
    text = pa.LargeStringArray.from_buffers(
        n, pa.py_buffer(offsets * 2), pa.py_buffer(body.hex().encode())
    )
    return _quoted(text.cast(_STR))


def _list(arr: pa.Array, t: pa.DataType) -> pa.Array:
    n = len(arr)
    if pa.types.is_fixed_size_list(t):
        values = arr.flatten()
        offsets = np.arange(n + 1, dtype=np.int64) * t.list_size
        if arr.null_count:  # flatten() skips the slots of null lists
            values = arr.values.slice(arr.offset * t.list_size, n * t.list_size)
    else:
        offsets = np.asarray(arr.offsets.to_numpy(), dtype=np.int64)
        values = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        offsets = offsets - offsets[0]
    return _join(offsets, _fragments(values), "[", "]")


def _map(arr: pa.MapArray) -> pa.Array:
    """Maps as orjson writes ``to_pylist``'s lists of ``(key, value)``: ``[[k,v],...]``."""
    offsets = np.asarray(arr.offsets.to_numpy(), dtype=np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    keys = _fragments(arr.keys.slice(lo, hi - lo))
    items = _fragments(arr.items.slice(lo, hi - lo))
    pairs = pc.binary_join_element_wise(
        pa.scalar("[", _STR), keys, pa.scalar(",", _STR), items, pa.scalar("]", _STR), ""
    )
    return _join(offsets - lo, pairs, "[", "]")


def _join(offsets: np.ndarray, fragments: pa.Array, opening: str, closing: str) -> pa.Array:
    if fragments.type != pa.large_string() and int(offsets[-1]) >= 2**31:
        fragments = fragments.cast(pa.large_string())
    lists = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), fragments)
    inner = pc.binary_join(lists, ",")
    out: pa.Array = pc.binary_join_element_wise(
        pa.scalar(opening, inner.type), inner, pa.scalar(closing, inner.type), ""
    )
    return out.cast(_STR)
