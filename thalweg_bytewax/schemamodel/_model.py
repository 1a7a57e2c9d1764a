"""The neutral schema model: fields with a type, required flag, description and losses."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Kind", "SchemaField", "SchemaModel", "SchemaType"]


class Kind(StrEnum):
    """The neutral type vocabulary; widths and time units are kept."""

    BOOLEAN = "boolean"
    INT32 = "int32"
    INT64 = "int64"
    UINT32 = "uint32"
    UINT64 = "uint64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    DECIMAL = "decimal"
    STRING = "string"
    BYTES = "bytes"
    FIXED = "fixed"
    UUID = "uuid"
    DATE = "date"
    TIME_MILLIS = "time-millis"
    TIME_MICROS = "time-micros"
    TIMESTAMP_MILLIS = "timestamp-millis"
    TIMESTAMP_MICROS = "timestamp-micros"
    LOCAL_TIMESTAMP_MILLIS = "local-timestamp-millis"
    LOCAL_TIMESTAMP_MICROS = "local-timestamp-micros"
    DURATION = "duration"
    ENUM = "enum"
    JSON = "json"
    NULL = "null"
    OBJECT = "object"
    ARRAY = "array"
    MAP = "map"
    UNION = "union"


@dataclass(frozen=True)
class SchemaType:
    """A type of the neutral model.

    Attributes:
        kind: What it is.
        name: The full name of a named type (record, enum, fixed, message).
        fields: The fields of an ``OBJECT``.
        items: The item type of an ``ARRAY``, the value type of a ``MAP``.
        items_required: Whether array items / map values are never null.
        symbols: The allowed values of an ``ENUM``.
        branches: The branches of a ``UNION`` (a null branch makes the field optional
            instead and is not listed).
        precision: Digits of a ``DECIMAL``.
        scale: Fractional digits of a ``DECIMAL``.
        size: Bytes of a ``FIXED``.
    """

    kind: Kind
    name: str | None = None
    fields: tuple[SchemaField, ...] = ()
    items: SchemaType | None = None
    items_required: bool = False
    symbols: tuple[str, ...] = ()
    branches: tuple[SchemaType, ...] = ()
    precision: int | None = None
    scale: int | None = None
    size: int | None = None


@dataclass(frozen=True)
class SchemaField:
    """A named field.

    Attributes:
        name: The field name.
        type: Its type.
        required: Whether it is never null.
        description: Its documentation, if the source has one.
    """

    name: str
    type: SchemaType
    required: bool
    description: str | None = None


@dataclass(frozen=True)
class SchemaModel:
    """A record schema in the neutral model.

    Attributes:
        name: The record's (full) name.
        fields: Its top-level fields.
        description: Its documentation.
        source_format: ``avro``, ``json-schema`` or ``protobuf``.
        losses: What the source says that the model does not keep (``path: what``).
    """

    name: str
    fields: tuple[SchemaField, ...]
    description: str | None = None
    source_format: str = ""
    losses: tuple[str, ...] = ()
