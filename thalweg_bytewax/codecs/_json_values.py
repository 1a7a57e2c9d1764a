"""Record-at-a-time JSON conversion, compiled from the same Arrow schema as the batch path.

Each converter checks one value against its Arrow type and returns the Python value the
batch row holds (``to_pylist(maps_as_pydicts="strict")``); a mismatch raises
:class:`JsonDecodeError` naming the field path. Timestamps, dates and decimals are JSON
strings parsed by the same Arrow casts the columnar path uses, so both accept exactly
the same text (a decimal as a JSON number is a mismatch: ``orjson`` would read it
through a float).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from thalweg_bytewax.codecs.base import FailureKind
from thalweg_bytewax.errors import DecodeError, SchemaError

__all__ = [
    "Converter",
    "JsonDecodeError",
    "compile_record",
    "mismatch",
    "numpy_dtype",
    "parse_type",
]

Converter = Callable[[Any], Any]
"""Checks and converts one decoded JSON value."""


def parse_type(t: pa.DataType) -> pa.DataType:
    """The type JSON text is parsed to before the safe cast to ``t``.

    Timestamps in seconds or milliseconds parse at microseconds first, so that
    ``.767000`` fits a millisecond column and ``.767123`` fails instead of truncating.
    """
    if pa.types.is_timestamp(t) and t.unit in ("s", "ms"):
        return pa.timestamp("us", tz=t.tz)
    return t


def parse_text(value: str, t: pa.DataType) -> Any:
    """``value`` through the Arrow casts the columnar path applies to text columns."""
    return pa.scalar(value, pa.string()).cast(parse_type(t)).cast(t).as_py()


class JsonDecodeError(DecodeError):
    """One JSON payload failed to decode; ``kind`` is its :class:`FailureKind`."""

    __module__ = "thalweg_bytewax.codecs.json"

    default_kind = FailureKind.SCHEMA_MISMATCH


def mismatch(path: str, expected: str, got: Any) -> JsonDecodeError:
    """A schema-mismatch error in the standard grammar."""
    shown = repr(got)
    if len(shown) > 60:  # noqa: PLR2004 - keep DLQ messages short
        shown = shown[:57] + "..."
    return JsonDecodeError(f"json field `{path}`: expected {expected}; got {shown}")


def numpy_dtype(t: pa.DataType) -> np.dtype[Any]:
    """The NumPy dtype of an Arrow integer or float type.

    ``DataType.to_pandas_dtype()`` is not used: some pyarrow releases import pandas
    for it, which is not a dependency.
    """
    kind = "f" if pa.types.is_floating(t) else "u" if pa.types.is_unsigned_integer(t) else "i"
    return np.dtype(f"{kind}{t.bit_width // 8}")


def _compile(t: pa.DataType, path: str, strict: bool) -> Converter:  # noqa: PLR0911
    if pa.types.is_null(t):

        def conv_null(v: Any) -> Any:  # called for non-null values only
            raise mismatch(path, "null", v)

        return conv_null
    if pa.types.is_integer(t):
        info = np.iinfo(numpy_dtype(t))
        low, high, what = int(info.min), int(info.max), f"an integer ({t})"

        def conv_int(v: Any) -> Any:
            if type(v) is int and low <= v <= high:
                return v
            raise mismatch(path, what, v)

        return conv_int
    if pa.types.is_floating(t):
        narrow = numpy_dtype(t).type if t.bit_width < 64 else None  # noqa: PLR2004
        what = f"a number within float{t.bit_width} range" if narrow is not None else "a number"

        def conv_float(v: Any) -> Any:
            if type(v) is float or type(v) is int:
                f = float(v)
                if narrow is not None:
                    with np.errstate(over="ignore"):
                        rounded = narrow(f)  # what the batch column holds
                    if np.isinf(rounded):  # an overflow, never a silent infinity
                        raise mismatch(path, what, v)
                    return float(rounded)
                return f
            raise mismatch(path, what, v)

        return conv_float
    if pa.types.is_boolean(t):

        def conv_bool(v: Any) -> Any:
            if type(v) is bool:
                return v
            raise mismatch(path, "a boolean", v)

        return conv_bool
    if pa.types.is_string(t) or pa.types.is_large_string(t):

        def conv_str(v: Any) -> Any:
            if type(v) is str:
                return v
            raise mismatch(path, "a string", v)

        return conv_str
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_decimal(t):
        if pa.types.is_timestamp(t) and t.tz is not None:
            what = "an RFC 3339 date-time with offset string"
        elif pa.types.is_timestamp(t):
            # A local date-time column: an instant with an offset would need a zone to
            # become local time, so it is refused rather than silently shifted.
            what = (
                f"a date-time string without offset (the column is {t}, local time; declare it "
                f"with a time zone, e.g. timestamp('{t.unit}', tz='UTC'), to take instants)"
            )
        else:
            what = "a date string" if pa.types.is_date(t) else f"a decimal ({t}) string"

        def conv_time(v: Any) -> Any:
            if type(v) is str:
                try:
                    return parse_text(v, t)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    pass
            raise mismatch(path, what, v)

        return conv_time
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = _compile(t.value_type, f"{path}[]", strict)
        item = _nullable(item) if t.value_field.nullable else _required(item, f"{path}[]")

        def conv_list(v: Any) -> Any:
            if type(v) is list:
                return [item(x) for x in v]
            raise mismatch(path, "an array", v)

        return conv_list
    if pa.types.is_map(t):
        value = _compile(t.item_type, f"{path}{{}}", strict)
        value = _nullable(value) if t.item_field.nullable else _required(value, f"{path}{{}}")

        def conv_map(v: Any) -> Any:
            if type(v) is dict:
                return {k: value(x) for k, x in v.items()}
            raise mismatch(path, "an object", v)

        return conv_map
    if pa.types.is_struct(t):
        return _compile_struct(list(t), path, strict)
    msg = (
        f"json codec: no JSON conversion for Arrow type {t} at `{path}`; use a JSON type "
        f"(string, integer, number, boolean, list, struct, map<string, _>, date, timestamp "
        f"or decimal)"
    )
    raise SchemaError(msg)


def _nullable(conv: Converter) -> Converter:
    def conv_or_null(v: Any) -> Any:
        return None if v is None else conv(v)

    return conv_or_null


def _required(conv: Converter, path: str) -> Converter:
    def conv_or_fail(v: Any) -> Any:
        if v is None:
            msg = f"json field `{path}`: required; got null"
            raise JsonDecodeError(msg)
        return conv(v)

    return conv_or_fail


def _compile_struct(fields: list[pa.Field], path: str, strict: bool) -> Converter:
    plan = [
        (f.name, f.nullable, _compile(f.type, f"{path}.{f.name}" if path else f.name, strict))
        for f in fields
    ]
    known = {f.name for f in fields}
    where = path or "$"

    def conv_struct(v: Any) -> Any:
        if type(v) is not dict:
            raise mismatch(where, "an object", v)
        if strict and not known.issuperset(v):
            extra = sorted(set(v) - known)[0]
            sub = f"{path}.{extra}" if path else extra
            msg = f"json field `{sub}`: not in the schema, which forbids additional properties"
            raise JsonDecodeError(msg)
        out: dict[str, Any] = {}
        for name, nullable, conv in plan:
            x = v.get(name)
            if x is None:
                if not nullable:
                    sub = f"{path}.{name}" if path else name
                    state = "missing" if name not in v else "null"
                    msg = f"json field `{sub}`: required; got {state}"
                    raise JsonDecodeError(msg)
                out[name] = None
            else:
                out[name] = conv(x)
        return out

    return conv_struct


def compile_record(schema: pa.Schema, *, strict: bool) -> Converter:
    """The converter of one top-level document for ``schema``."""
    return _compile_struct(list(schema), "", strict)
