"""The column-wise row JSON writer: one JSON fragment per value with Arrow string kernels.

Lists and maps are joined per row with ``binary_join``, structs and the row object with
``binary_join_element_wise``; no Python loop runs over rows. A type without an exact
columnar spelling here is written value by value through orjson, for that column only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import time
from decimal import Decimal
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "MAX_PLAIN_SCALE",
    "UTC_ZONES",
    "columnwise_rows",
    "fragments",
    "json_default",
    "spell_non_finite",
    "value_json",
]

_STR = pa.string()
_NULL = pa.scalar("null", _STR)
_QUOTE = pa.scalar('"', _STR)
UTC_ZONES = frozenset({"UTC", "Etc/UTC", "+00:00"})
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
# Decimal's str() switches to exponent form below 1e-6 (e.g. ``1E-8``); Arrow never does.
MAX_PLAIN_SCALE = 6
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


def columnwise_rows(batch: pa.RecordBatch) -> pa.Array:
    """The column-wise path: every row of ``batch`` (unique column names)."""
    return _object(
        batch.schema.names, [batch.column(i) for i in range(batch.num_columns)], batch.num_rows
    )


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
        parts.append(fragments(field))
    parts.append(pa.scalar("}", _STR))
    out = pc.binary_join_element_wise(*parts, "")
    return out if isinstance(out, pa.Array) else pa.repeat(out, n)


def fragments(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
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
        if not 0 <= t.scale <= MAX_PLAIN_SCALE:
            return None
        return _quoted(arr.cast(_STR))
    if pa.types.is_timestamp(t):
        return _timestamps(arr, t)
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return _dates(arr)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return _hex(arr)
    if pa.types.is_dictionary(t):
        return fragments(arr.dictionary_decode())
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
    if t.unit not in _MICROS or (t.tz is not None and t.tz not in UTC_ZONES):
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
    return _join(offsets, fragments(values), "[", "]")


def _map(arr: pa.MapArray) -> pa.Array:
    """Maps as orjson writes ``to_pylist``'s lists of ``(key, value)``: ``[[k,v],...]``."""
    offsets = np.asarray(arr.offsets.to_numpy(), dtype=np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    keys = fragments(arr.keys.slice(lo, hi - lo))
    items = fragments(arr.items.slice(lo, hi - lo))
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
