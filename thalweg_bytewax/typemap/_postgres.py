"""Arrow ↔ PostgreSQL column types: DDL text from a fixed vocabulary, and its reverse."""

from __future__ import annotations

import re

import pyarrow as pa

from thalweg_bytewax.errors import SchemaError
from thalweg_bytewax.typemap._canonical import Conversion, canonical_type

__all__ = ["arrow_type_of_postgres", "postgres_type"]

# Canonical Arrow type -> DDL text. Every word of DDL this module emits comes from here
# or from the integer formatting of numeric(p, s); nothing comes from user text.
_DDL: dict[pa.DataType, str] = {
    pa.bool_(): "boolean",
    pa.int16(): "smallint",
    pa.int32(): "integer",
    pa.int64(): "bigint",
    pa.float32(): "real",
    pa.float64(): "double precision",
    pa.string(): "text",
    pa.binary(): "bytea",
    pa.date32(): "date",
    pa.time64("us"): "time",
    pa.timestamp("us"): "timestamp",
    pa.timestamp("us", tz="UTC"): "timestamptz",
    pa.duration("us"): "interval",
    pa.uuid(): "uuid",
    pa.json_(): "jsonb",
}
# Names PostgreSQL reports (format_type, information_schema) -> canonical Arrow type.
_REVERSE: dict[str, pa.DataType] = {
    **{ddl: t for t, ddl in _DDL.items()},
    "bool": pa.bool_(),
    "int2": pa.int16(),
    "int4": pa.int32(),
    "int": pa.int32(),
    "int8": pa.int64(),
    "float4": pa.float32(),
    "float8": pa.float64(),
    "character varying": pa.string(),
    "varchar": pa.string(),
    "json": pa.json_(),
    "timestamp without time zone": pa.timestamp("us"),
    "timestamp with time zone": pa.timestamp("us", tz="UTC"),
    "time without time zone": pa.time64("us"),
}
_NUMERIC = re.compile(r"^(?:numeric|decimal)\s*\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")
_NUMERIC_P = re.compile(r"^(?:numeric|decimal)\s*\(\s*(\d+)\s*\)$")
_VARCHAR = re.compile(r"^(?:character varying|varchar|character|char|bpchar)\s*\(\s*\d+\s*\)$")
# Only microsecond precision is the type thalweg writes: `timestamp(3)` would round.
_TEMPORAL_P = re.compile(r"^(timestamp|time)\s*\(\s*6\s*\)(\s+with(?:out)? time zone)?$")
_DECIMAL128_DIGITS = 38
_DECIMAL256_DIGITS = 76


def postgres_type(t: pa.DataType, *, conversion: Conversion | None = None) -> str:
    """The PostgreSQL column type (DDL text) that holds the Arrow type ``t``.

    Scalars map to their exact home (``int32`` → ``integer``, ``uint32`` → ``bigint``,
    ``uint64`` → ``numeric(20,0)``, ``decimal128(p, s)`` → ``numeric(p,s)``, timestamps
    with a zone → ``timestamptz``, ``uuid`` → ``uuid``). A list of scalars becomes an
    array (``bigint[]``); structs, maps, unions and lists of nested values become
    ``jsonb``. See docs/tables.md for the whole table.

    Args:
        t: The Arrow type.
        conversion: The column's opt-in conversion (``"truncate"`` admits nanoseconds).

    Returns:
        DDL text from a fixed vocabulary, never from user input.

    Raises:
        SchemaError: PostgreSQL cannot hold ``t``; the message names it and the remedy.
    """
    return _ddl(canonical_type(t, "postgres", conversion=conversion))


def _ddl(c: pa.DataType) -> str:
    if pa.types.is_decimal(c):
        return f"numeric({int(c.precision)},{int(c.scale)})"
    if pa.types.is_list(c):
        return _ddl(c.value_type) + "[]"
    return _DDL[c]


def arrow_type_of_postgres(pg_type: str) -> pa.DataType:
    """The canonical Arrow type of a PostgreSQL column type, for describing a table.

    Accepts what ``format_type()`` and ``information_schema`` report, aliases included
    (``int8``, ``character varying(20)``, ``timestamp(3) with time zone``, ``bigint[]``).

    Args:
        pg_type: The column type text.

    Returns:
        The Arrow type :func:`postgres_type` maps back to the same column type.

    Raises:
        SchemaError: The type is outside the vocabulary thalweg writes (e.g. an
            unconstrained ``numeric``, a domain or a composite type).
    """
    text = " ".join(pg_type.strip().lower().split())
    if text.endswith("[]"):
        return pa.list_(arrow_type_of_postgres(text[:-2]))
    if text in _REVERSE:
        return _REVERSE[text]
    if m := _NUMERIC.match(text) or _NUMERIC_P.match(text):
        precision = int(m.group(1))
        scale = int(m.group(2)) if m.lastindex == 2 else 0  # noqa: PLR2004
        if 0 < precision <= _DECIMAL128_DIGITS and scale <= precision:
            return pa.decimal128(precision, scale)
        if 0 < precision <= _DECIMAL256_DIGITS and scale <= precision:
            return pa.decimal256(precision, scale)
    if _VARCHAR.match(text):
        return pa.string()
    if m := _TEMPORAL_P.match(text):
        return arrow_type_of_postgres(m.group(1) + (m.group(2) or ""))
    msg = (
        f"postgres type map: expected a column type thalweg writes (see docs/tables.md); "
        f"got {pg_type!r}; alter the column to a mapped type or write to another table"
    )
    raise SchemaError(msg)
