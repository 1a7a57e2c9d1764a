"""Map ODCS v3 logical and physical types to Arrow types.

A type the mapping cannot honour fails with the path of the offending field.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from thalweg_bytewax.contracts.errors import ContractError

__all__ = ["LOGICAL_TYPES", "arrow_type", "field_error", "logical_type_options"]

LOGICAL_TYPES = (
    "string",
    "date",
    "timestamp",
    "time",
    "integer",
    "number",
    "boolean",
    "object",
    "array",
    "map",
    "vector",
)
"""The ODCS v3 logical types the loader maps to Arrow."""

_DECIMAL = re.compile(
    r"^\s*(?:decimal|numeric|number)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)\s*$", re.I
)
_INT_PHYSICAL = {
    "tinyint": pa.int8(),
    "int8": pa.int8(),
    "byte": pa.int8(),
    "smallint": pa.int16(),
    "int16": pa.int16(),
    "short": pa.int16(),
    "int": pa.int32(),
    "int32": pa.int32(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "int64": pa.int64(),
    "long": pa.int64(),
}
_FLOAT_PHYSICAL = {
    "float": pa.float32(),
    "real": pa.float32(),
    "float32": pa.float32(),
    "double": pa.float64(),
    "float64": pa.float64(),
    "double precision": pa.float64(),
}
_VECTOR_ELEMENTS = {
    "float16": pa.float16(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "int8": pa.int8(),
    "uint8": pa.uint8(),
}


def field_error(origin: str, path: str, detail: str) -> ContractError:
    """A :class:`ContractError` naming the contract and the path of the offending field."""
    return ContractError(f"contract `{origin}`: `{path}`: {detail}")


def logical_type_options(prop: Any) -> dict[str, Any]:
    """A property's ``logicalTypeOptions`` as a dict (empty when it has none)."""
    return dict(prop.logicalTypeOptions or {})


def arrow_type(origin: str, path: str, prop: Any) -> pa.DataType:  # noqa: C901
    """The Arrow type of an ODCS property, from its logical and physical type."""
    logical = prop.logicalType
    physical = (prop.physicalType or "").strip().lower()
    opts = logical_type_options(prop)
    if logical is None:
        if physical in _INT_PHYSICAL:
            return _INT_PHYSICAL[physical]
        if physical in _FLOAT_PHYSICAL:
            return _FLOAT_PHYSICAL[physical]
        if (m := _DECIMAL.match(physical)) is not None:
            return _decimal(origin, f"{path}.physicalType", int(m.group(1)), int(m.group(2) or 0))
        if physical in ("string", "varchar", "text") or physical.startswith("varchar"):
            return pa.string()
        raise field_error(
            origin,
            f"{path}.logicalType",
            f"expected a logical type (one of {list(LOGICAL_TYPES)!r}) or a known physical "
            f"type; got neither (physicalType={prop.physicalType!r})",
        )
    match logical:
        case "string":
            return pa.binary() if physical in ("binary", "bytes", "blob", "bytea") else pa.string()
        case "date":
            return pa.date32()
        case "timestamp":
            unit = "ms" if ("millis" in physical or "(3)" in physical) else "us"
            naive = "ntz" in physical or "without time zone" in physical or physical == "datetime"
            return pa.timestamp(unit) if naive else pa.timestamp(unit, tz="UTC")
        case "time":
            return pa.time64("us")
        case "integer":
            return _INT_PHYSICAL.get(physical, pa.int64())
        case "number":
            if (m := _DECIMAL.match(physical)) is not None:
                where = f"{path}.physicalType"
                return _decimal(origin, where, int(m.group(1)), int(m.group(2) or 0))
            if "precision" in opts:
                where = f"{path}.logicalTypeOptions"
                return _decimal(origin, where, int(opts["precision"]), int(opts.get("scale", 0)))
            return _FLOAT_PHYSICAL.get(physical, pa.float64())
        case "boolean":
            return pa.bool_()
        case "object":
            fields = [
                pa.field(p.name, arrow_type(origin, f"{path}.properties[{i}]", p), not p.required)
                for i, p in enumerate(prop.properties or ())
            ]
            return pa.struct(fields)
        case "array":
            if prop.items is None:
                return pa.list_(_untyped_items(origin, f"{path}.physicalType", physical))
            item = arrow_type(origin, f"{path}.items", prop.items)
            return pa.list_(pa.field("item", item, nullable=not prop.items.required))
        case "map":
            if prop.map is None or prop.map.key is None or prop.map.value is None:
                raise field_error(origin, f"{path}.map", "expected `key` and `value` of a map")
            value = arrow_type(origin, f"{path}.map.value", prop.map.value)
            return pa.map_(
                arrow_type(origin, f"{path}.map.key", prop.map.key),
                pa.field("value", value, nullable=not prop.map.value.required),
            )
        case "vector":
            element = _VECTOR_ELEMENTS.get(str(opts.get("elementType", "float32")))
            if element is None or "dimensions" not in opts:
                raise field_error(
                    origin,
                    f"{path}.logicalTypeOptions",
                    f"expected `dimensions` and an `elementType` in {sorted(_VECTOR_ELEMENTS)!r}",
                )
            return pa.list_(element, int(opts["dimensions"]))
        case _:
            raise field_error(
                origin,
                f"{path}.logicalType",
                f"unknown logical type; expected one of {list(LOGICAL_TYPES)!r}; got {logical!r}",
            )


def _decimal(origin: str, path: str, precision: int, scale: int) -> pa.DataType:
    """``decimal128`` up to 38 digits, ``decimal256`` up to 76; anything else is refused."""
    if not 1 <= precision <= 76 or not 0 <= scale <= precision:
        raise field_error(
            origin,
            path,
            f"expected a decimal precision from 1 to 76 and a scale from 0 to the precision; "
            f"got precision {precision} and scale {scale}",
        )
    if precision <= 38:
        return pa.decimal128(precision, scale)
    return pa.decimal256(precision, scale)


_ARRAY_PHYSICAL = re.compile(r"^\s*(?:array|list)\s*<\s*(.+?)\s*>\s*$|^\s*(.+?)\s*\[\s*\]\s*$")


def _untyped_items(origin: str, path: str, physical: str) -> pa.DataType:
    """The item type of an ``array`` without ``items``.

    The physical type names it when it can (``array<int>``, ``list<double>``,
    ``varchar[]``); otherwise the items are strings, the type ODCS gives a value it
    does not otherwise describe.
    """
    m = _ARRAY_PHYSICAL.match(physical)
    inner = (m.group(1) or m.group(2)).strip().lower() if m else ""
    if inner in _INT_PHYSICAL:
        return _INT_PHYSICAL[inner]
    if inner in _FLOAT_PHYSICAL:
        return _FLOAT_PHYSICAL[inner]
    if (d := _DECIMAL.match(inner)) is not None:
        return _decimal(origin, path, int(d.group(1)), int(d.group(2) or 0))
    if inner in ("boolean", "bool"):
        return pa.bool_()
    return pa.string()
