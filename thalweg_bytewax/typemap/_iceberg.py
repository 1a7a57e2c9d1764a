"""Arrow ↔ Iceberg types, rendered from the canonical Iceberg shape of an Arrow type.

pyiceberg is imported on first use (``_deps.require``), so core stays importable without
the ``iceberg`` extra; :func:`iceberg_type_name` needs no pyiceberg at all.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from thalweg_bytewax._deps import require
from thalweg_bytewax.errors import SchemaError
from thalweg_bytewax.typemap._canonical import Conversion, canonical_type

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.types import IcebergType

__all__ = ["arrow_type_of_iceberg", "iceberg_schema", "iceberg_type", "iceberg_type_name"]

_NAMES: dict[pa.DataType, str] = {
    pa.bool_(): "boolean",
    pa.int32(): "int",
    pa.int64(): "long",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.string(): "string",
    pa.binary(): "binary",
    pa.uuid(): "uuid",
    pa.date32(): "date",
    pa.time64("us"): "time",
    pa.timestamp("us"): "timestamp",
    pa.timestamp("us", tz="UTC"): "timestamptz",
    pa.timestamp("ns"): "timestamp_ns",
    pa.timestamp("ns", tz="UTC"): "timestamptz_ns",
}


def iceberg_type_name(t: pa.DataType, *, conversion: Conversion | None = None) -> str:
    """The Iceberg type of ``t`` in the specification's spelling (``decimal(10, 2)``).

    Raises:
        SchemaError: Iceberg cannot hold ``t``; the message names it and the remedy.
    """
    return _name(canonical_type(t, "iceberg", conversion=conversion))


def _name(c: pa.DataType) -> str:
    if pa.types.is_decimal(c):
        return f"decimal({c.precision}, {c.scale})"
    if pa.types.is_fixed_size_binary(c):
        return f"fixed[{c.byte_width}]"
    if pa.types.is_struct(c):
        return "struct<" + ", ".join(f"{f.name}: {_name(f.type)}" for f in c) + ">"
    if pa.types.is_list(c):
        return f"list<{_name(c.value_type)}>"
    if pa.types.is_map(c):
        return f"map<{_name(c.key_type)}, {_name(c.item_type)}>"
    return _NAMES[c]


def iceberg_type(
    t: pa.DataType,
    *,
    conversion: Conversion | None = None,
    next_id: Callable[[], int] | None = None,
) -> IcebergType:
    """The pyiceberg type that holds the Arrow type ``t``.

    Integers narrower than 32 bits and ``uint16`` become ``int``, ``uint32`` ``long``,
    ``uint64`` ``decimal(20, 0)``; ``fixed_size_binary(n)`` ``fixed[n]``; durations a
    ``long`` of microseconds; nested types stay nested with optional children. Nested
    field ids come from ``next_id`` (default: 1, 2, ...); pyiceberg reassigns fresh ids
    when a type is added to a table, so placeholders are fine there.

    Raises:
        SchemaError: Iceberg cannot hold ``t`` (a union, an all-null column,
            nanoseconds without ``"truncate"``, a decimal past 38 digits).
        MissingDependencyError: pyiceberg is not installed.
    """
    ids = next_id or _counter()
    return _build(canonical_type(t, "iceberg", conversion=conversion), ids)


def _counter() -> Callable[[], int]:
    it: Iterator[int] = itertools.count(1)
    return lambda: next(it)


def _build(c: pa.DataType, ids: Callable[[], int]) -> IcebergType:  # noqa: PLR0911
    T = require("pyiceberg.types", extra="iceberg")  # noqa: N806 - the module, as a namespace
    if pa.types.is_decimal(c):
        return T.DecimalType(c.precision, c.scale)  # type: ignore[no-any-return]
    if pa.types.is_fixed_size_binary(c):
        return T.FixedType(c.byte_width)  # type: ignore[no-any-return]
    if pa.types.is_struct(c):
        fields = [
            T.NestedField(ids(), f.name, _build(f.type, ids), required=False) for f in c
        ]
        return T.StructType(*fields)  # type: ignore[no-any-return]
    if pa.types.is_list(c):
        element_id = ids()
        return T.ListType(  # type: ignore[no-any-return]
            element_id, _build(c.value_type, ids), element_required=False
        )
    if pa.types.is_map(c):
        key_id, value_id = ids(), ids()
        return T.MapType(  # type: ignore[no-any-return]
            key_id, _build(c.key_type, ids), value_id, _build(c.item_type, ids),
            value_required=False,
        )
    return getattr(T, _PRIMITIVE_CLASSES[_NAMES[c]])()  # type: ignore[no-any-return]


_PRIMITIVE_CLASSES = {
    "boolean": "BooleanType",
    "int": "IntegerType",
    "long": "LongType",
    "float": "FloatType",
    "double": "DoubleType",
    "string": "StringType",
    "binary": "BinaryType",
    "uuid": "UUIDType",
    "date": "DateType",
    "time": "TimeType",
    "timestamp": "TimestampType",
    "timestamptz": "TimestamptzType",
    "timestamp_ns": "TimestampNanoType",
    "timestamptz_ns": "TimestamptzNanoType",
}
_ARROW_OF_CLASS = {_PRIMITIVE_CLASSES[name]: t for t, name in _NAMES.items()}


def iceberg_schema(
    schema: pa.Schema, *, conversions: dict[str, Conversion] | None = None
) -> Schema:
    """A pyiceberg schema for an Arrow schema: top-level ids 1..n, nested ids after.

    A top-level field is required exactly when the Arrow field is not nullable.

    Raises:
        SchemaError: A column's type cannot be held; the message names the column.
    """
    T = require("pyiceberg.types", extra="iceberg")  # noqa: N806
    S = require("pyiceberg.schema", extra="iceberg")  # noqa: N806
    it = itertools.count(len(schema) + 1)
    conv = conversions or {}
    fields = []
    for i, f in enumerate(schema, start=1):
        try:
            ftype = iceberg_type(f.type, conversion=conv.get(f.name), next_id=lambda: next(it))
        except SchemaError as exc:
            msg = f"iceberg type map: column `{f.name}`: {exc}"
            raise SchemaError(msg) from exc
        fields.append(T.NestedField(i, f.name, ftype, required=not f.nullable))
    return S.Schema(*fields)  # type: ignore[no-any-return]


def arrow_type_of_iceberg(t: IcebergType) -> pa.DataType:
    """The canonical Arrow type of an Iceberg type, for describing a table.

    Raises:
        SchemaError: The type is outside the vocabulary thalweg writes (e.g. ``variant``,
            ``geometry``).
    """
    T = require("pyiceberg.types", extra="iceberg")  # noqa: N806
    if isinstance(t, T.DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, T.FixedType):
        return pa.binary(len(t))
    if isinstance(t, T.StructType):
        return pa.struct([pa.field(f.name, arrow_type_of_iceberg(f.field_type)) for f in t.fields])
    if isinstance(t, T.ListType):
        return pa.list_(arrow_type_of_iceberg(t.element_type))
    if isinstance(t, T.MapType):
        return pa.map_(arrow_type_of_iceberg(t.key_type), arrow_type_of_iceberg(t.value_type))
    for cls, arrow in _ARROW_OF_CLASS.items():
        if type(t) is getattr(T, cls):
            return arrow
    msg = (
        f"iceberg type map: expected a type thalweg writes (see docs/tables.md); got "
        f"`{t}`; write to another table or column"
    )
    raise SchemaError(msg)
