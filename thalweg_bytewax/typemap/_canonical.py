"""The column type a target gives each Arrow type, expressed in Arrow.

Every target (PostgreSQL, Iceberg) holds a fixed vocabulary of column types. The
*canonical* Arrow type of ``t`` for a target is the Arrow type of the column ``t`` lands
in: ``uint32`` lands in a PostgreSQL ``bigint``, so its canonical type is ``int64``;
a struct lands in ``jsonb``, canonically ``pa.json_()``. Two Arrow types map to the same
target column type exactly when their canonical types are equal, which is how the
provisioning plan compares a batch with a live table without touching a driver.

The DDL text (PostgreSQL) and the pyiceberg types are rendered from the canonical type,
so there is one mapping per target, not one per direction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import pyarrow as pa

from thalweg_bytewax.errors import SchemaError

__all__ = [
    "CONVERSIONS",
    "TARGETS",
    "Conversion",
    "Target",
    "canonical_type",
    "is_nested",
    "same_type",
]

Target = Literal["postgres", "iceberg"]
"""A table engine thalweg provisions."""

TARGETS: tuple[Target, ...] = ("postgres", "iceberg")
"""Every :data:`Target`."""

Conversion = Literal["json", "utc", "truncate"]
"""An opt-in, per column, for a change that is not lossless by type.

``json``: a nested or union value is written as JSON text into a string column.
``utc``: a timestamp with a zone is written into a zone-less column as its UTC wall
clock (and a zone-less one into a zoned column as if it were UTC).
``truncate``: nanoseconds are truncated to the microseconds both targets hold.
"""

CONVERSIONS: tuple[Conversion, ...] = ("json", "utc", "truncate")
"""Every :data:`Conversion`."""

_UTC = "UTC"
_MICRO = "us"
# Smallest PostgreSQL integer that holds every value of an Arrow integer type.
_PG_INTS: dict[pa.DataType, pa.DataType] = {
    pa.int8(): pa.int16(),
    pa.uint8(): pa.int16(),
    pa.int16(): pa.int16(),
    pa.uint16(): pa.int32(),
    pa.int32(): pa.int32(),
    pa.uint32(): pa.int64(),
    pa.int64(): pa.int64(),
}
# Iceberg has 32- and 64-bit integers only.
_ICE_INTS: dict[pa.DataType, pa.DataType] = {
    pa.int8(): pa.int32(),
    pa.uint8(): pa.int32(),
    pa.int16(): pa.int32(),
    pa.uint16(): pa.int32(),
    pa.int32(): pa.int32(),
    pa.uint32(): pa.int64(),
    pa.int64(): pa.int64(),
}
# uint64 has no signed 64-bit home; decimal(20, 0) holds 18446744073709551615.
_UINT64_HOME = pa.decimal128(20, 0)
_ICEBERG_MAX_PRECISION = 38
_LIST_TYPES = (
    pa.types.is_list,
    pa.types.is_large_list,
    pa.types.is_fixed_size_list,
    pa.types.is_list_view,
    pa.types.is_large_list_view,
)


def is_nested(t: pa.DataType) -> bool:
    """Whether ``t`` is a struct, list-like, map or union (a value with parts)."""
    return (
        pa.types.is_struct(t)
        or pa.types.is_map(t)
        or pa.types.is_union(t)
        or any(f(t) for f in _LIST_TYPES)
    )


def _is_list(t: pa.DataType) -> bool:
    return any(f(t) for f in _LIST_TYPES)


def _refuse(target: Target, t: pa.DataType, expected: str, remedy: str) -> SchemaError:
    msg = f"{target} type map: expected {expected}; got `{t}`; {remedy}"
    return SchemaError(msg)


def _micro(t: pa.DataType, target: Target, conversion: Conversion | None) -> None:
    """Refuse nanosecond precision unless ``truncate`` was opted into."""
    if t.unit == "ns" and conversion != "truncate":
        raise _refuse(
            target,
            t,
            "at most microsecond precision (both targets hold microseconds)",
            'opt in with the `"truncate"` conversion for the column, or cast upstream',
        )


def _temporal(t: pa.DataType, target: Target, conversion: Conversion | None) -> pa.DataType:
    if pa.types.is_date(t):
        return pa.date32()
    if pa.types.is_time(t):
        _micro(t, target, conversion)
        return pa.time64(_MICRO)
    if pa.types.is_timestamp(t):
        _micro(t, target, conversion)
        # Any zone names an instant: the target stores it as UTC.
        return pa.timestamp(_MICRO, tz=_UTC if t.tz else None)
    if pa.types.is_duration(t):
        _micro(t, target, conversion)
        # PostgreSQL: interval. Iceberg has no duration type: a long of microseconds.
        return pa.duration(_MICRO) if target == "postgres" else pa.int64()
    if t == pa.month_day_nano_interval() and target == "postgres":
        return pa.duration(_MICRO)
    raise _refuse(target, t, "a type the target can hold", "cast the column upstream")


def _scalar(t: pa.DataType, target: Target, conversion: Conversion | None) -> pa.DataType:  # noqa: PLR0911 - one branch per type family
    if pa.types.is_boolean(t):
        return pa.bool_()
    if pa.types.is_integer(t):
        if t == pa.uint64():
            return _UINT64_HOME
        return (_PG_INTS if target == "postgres" else _ICE_INTS)[t]
    if pa.types.is_floating(t):
        return pa.float64() if t == pa.float64() else pa.float32()
    if pa.types.is_decimal(t):
        if target == "iceberg" and not (0 <= t.scale <= t.precision <= _ICEBERG_MAX_PRECISION):
            raise _refuse(
                target,
                t,
                f"a decimal of precision at most {_ICEBERG_MAX_PRECISION} and scale 0..precision",
                "cast the column to a narrower decimal or to string upstream",
            )
        if target == "postgres" and t.scale > t.precision:
            raise _refuse(target, t, "a decimal with scale at most its precision", "cast upstream")
        return pa.decimal128(t.precision, t.scale) if t.precision <= 38 else t  # noqa: PLR2004
    if isinstance(t, pa.UuidType):
        return pa.uuid()
    if isinstance(t, pa.JsonType):
        return pa.json_() if target == "postgres" else pa.string()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_fixed_size_binary(t):
        return pa.binary() if target == "postgres" else t
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    return _temporal(t, target, conversion)


def canonical_type(
    t: pa.DataType, target: Target, *, conversion: Conversion | None = None
) -> pa.DataType:
    """The Arrow type of the column ``t`` lands in on ``target``.

    Args:
        t: An Arrow type, as a codec or a file source produces it.
        target: ``"postgres"`` or ``"iceberg"``.
        conversion: The column's opt-in conversion, if any (``"truncate"`` admits
            nanosecond precision; the others do not change the column type).

    Returns:
        A type from the target's canonical vocabulary; ``canonical_type`` of it is itself.

    Raises:
        SchemaError: The target cannot hold ``t`` (an all-null column, a union on
            Iceberg, nanoseconds without ``"truncate"``, a decimal past Iceberg's 38
            digits); the message names the type and the remedy.
    """
    if target not in TARGETS:
        msg = f"type map: expected a target in {TARGETS!r}; got {target!r}"
        raise SchemaError(msg)
    if pa.types.is_dictionary(t):
        return canonical_type(t.value_type, target, conversion=conversion)
    if pa.types.is_null(t):
        raise _refuse(
            target,
            t,
            "a column type (every value of an all-null column is null, so no type is known)",
            "declare the column's type in the contract or cast it upstream",
        )
    if isinstance(t, pa.ExtensionType) and not isinstance(t, pa.UuidType | pa.JsonType):
        return canonical_type(t.storage_type, target, conversion=conversion)
    if not is_nested(t):
        return _scalar(t, target, conversion)
    if target == "postgres":
        return _postgres_nested(t, conversion)
    return _iceberg_nested(t, conversion)


def _postgres_nested(t: pa.DataType, conversion: Conversion | None) -> pa.DataType:
    # A list of scalars is a PostgreSQL array (`bigint[]`); everything else nested
    # (structs, maps, unions, lists of anything nested) is a `jsonb` document, since
    # PostgreSQL arrays must be rectangular and composite types would need DDL of their own.
    if _is_list(t) and not is_nested(_storage(t.value_type)):
        item = canonical_type(t.value_type, "postgres", conversion=conversion)
        if not isinstance(item, pa.JsonType):
            return pa.list_(item)
    return pa.json_()


def _storage(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _storage(t.value_type)
    if isinstance(t, pa.ExtensionType) and not isinstance(t, pa.UuidType | pa.JsonType):
        return _storage(t.storage_type)
    return t


def _iceberg_nested(t: pa.DataType, conversion: Conversion | None) -> pa.DataType:
    def inner(x: pa.DataType) -> pa.DataType:
        return canonical_type(x, "iceberg", conversion=conversion)

    # Nested fields are optional in the canonical shape: an optional field accepts every
    # batch, and Iceberg refuses appending nullable Arrow fields into required ones.
    if pa.types.is_struct(t):
        if t.num_fields == 0:
            err = _refuse("iceberg", t, "a struct with at least one field", "drop the column")
            raise err
        return pa.struct([pa.field(f.name, inner(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(inner(t.key_type), inner(t.item_type))
    if _is_list(t):
        return pa.list_(inner(t.value_type))
    err = _refuse(
        "iceberg",
        t,
        "a type Iceberg can hold (it has no union type)",
        "project the union to one column per branch, or to JSON text with SQL "
        "`to_json(...)`, before the sink",
    )
    raise err


def same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Whether two canonical types are the same column type (nested nullability aside)."""
    return bool(_strip(a) == _strip(b))


def _strip(t: pa.DataType) -> pa.DataType:
    fix: Callable[[pa.DataType], pa.DataType] = _strip
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, fix(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(fix(t.key_type), fix(t.item_type))
    if pa.types.is_list(t):
        return pa.list_(fix(t.value_type))
    return t
