"""Record-at-a-time JSON conversion, compiled from the same Arrow schema as the batch path.

Each converter checks one value against its Arrow type and returns the Python value the
batch row holds (``to_pylist(maps_as_pydicts="strict")``); a mismatch raises
:class:`JsonDecodeError` naming the field path. Timestamps and dates are parsed by the
same Arrow cast the columnar path uses, so both accept exactly the same text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from thalweg_bytewax.codecs.base import FailureKind
from thalweg_bytewax.errors import DecodeError

__all__ = ["Converter", "JsonDecodeError", "compile_record", "mismatch"]

Converter = Callable[[Any], Any]
"""Checks and converts one decoded JSON value."""

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


class JsonDecodeError(DecodeError):
    """One JSON payload failed to decode; ``kind`` is its :class:`FailureKind`."""

    def __init__(self, message: str, kind: FailureKind = FailureKind.SCHEMA_MISMATCH) -> None:
        super().__init__(message, kind)
        self.kind = kind

    def __str__(self) -> str:
        return str(self.args[0])


def mismatch(path: str, expected: str, got: Any) -> JsonDecodeError:
    """A schema-mismatch error in the standard grammar."""
    shown = repr(got)
    if len(shown) > 60:  # noqa: PLR2004 - keep DLQ messages short
        shown = shown[:57] + "..."
    return JsonDecodeError(f"json field `{path}`: expected {expected}; got {shown}")


def _compile(t: pa.DataType, path: str, strict: bool) -> Converter:  # noqa: PLR0911
    if pa.types.is_int64(t):

        def conv_int(v: Any) -> Any:
            if type(v) is int and _I64_MIN <= v <= _I64_MAX:
                return v
            raise mismatch(path, "an integer (int64)", v)

        return conv_int
    if pa.types.is_floating(t):

        def conv_float(v: Any) -> Any:
            if type(v) is float or type(v) is int:
                return float(v)
            raise mismatch(path, "a number", v)

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
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        what = "an RFC 3339 date-time with offset" if pa.types.is_timestamp(t) else "a date"

        def conv_time(v: Any) -> Any:
            if type(v) is str:
                try:
                    return pa.scalar(v, pa.string()).cast(t).as_py()
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    pass
            raise mismatch(path, f"{what} string", v)

        return conv_time
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = _nullable(_compile(t.value_type, f"{path}[]", strict))

        def conv_list(v: Any) -> Any:
            if type(v) is list:
                return [item(x) for x in v]
            raise mismatch(path, "an array", v)

        return conv_list
    if pa.types.is_map(t):
        value = _nullable(_compile(t.item_type, f"{path}{{}}", strict))

        def conv_map(v: Any) -> Any:
            if type(v) is dict:
                return {k: value(x) for k, x in v.items()}
            raise mismatch(path, "an object", v)

        return conv_map
    if pa.types.is_struct(t):
        return _compile_struct(list(t), path, strict)
    msg = f"json codec: no JSON conversion for Arrow type {t} at `{path}`"
    raise TypeError(msg)


def _nullable(conv: Converter) -> Converter:
    def conv_or_null(v: Any) -> Any:
        return None if v is None else conv(v)

    return conv_or_null


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
        out = {}
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
