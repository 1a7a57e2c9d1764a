"""JSON Schema -> Arrow: the one type mapping of the JSON codec.

=================================================  ==================================
JSON Schema                                        Arrow
=================================================  ==================================
``string``                                         ``string``
``string`` + ``format: date-time``                 ``timestamp("us", tz="UTC")``
``string`` + ``format: date``                      ``date32``
``integer``                                        ``int64``
``number``                                         ``float64``
``boolean``                                        ``bool``
``array`` + ``items``                              ``list<items>``
``object`` + ``properties``                        ``struct<...>``
``object`` + ``additionalProperties: <schema>``    ``map<string, ...>``
``["T", "null"]`` / ``anyOf [T, null]``            nullable ``T``
``enum`` / ``const`` of strings                    ``string``
=================================================  ==================================

A property is non-nullable when it is ``required`` and its type does not admit
``null``. Local ``$ref`` (``#/$defs/..``, ``#/definitions/..``) are followed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from thalweg_bytewax.errors import SchemaError
from thalweg_bytewax.schemamodel._json_schema_doc import json_type, resolve_ref, root_object

__all__ = ["TIMESTAMP_TYPE", "JsonShape", "shape_from_arrow", "shape_from_json_schema"]

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
"""What ``format: date-time`` maps to."""

_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "integer": pa.int64(),
    "number": pa.float64(),
    "boolean": pa.bool_(),
}
_FORMATS: dict[str, pa.DataType] = {"date-time": TIMESTAMP_TYPE, "date": pa.date32()}


@dataclass(frozen=True)
class JsonShape:
    """The resolved output schema and whether unknown object keys are an error."""

    schema: pa.Schema
    strict: bool
    """``additionalProperties: false`` at the top: unknown keys at any level fail."""


def _type_of(
    node: Mapping[str, Any], root: Mapping[str, Any], path: str
) -> tuple[pa.DataType, bool]:
    """Arrow type of ``node`` and whether it admits null."""
    node = resolve_ref(node, root, path)
    for key in ("anyOf", "oneOf"):
        if key in node:
            options = [resolve_ref(o, root, path) for o in node[key]]
            real = [o for o in options if o.get("type") != "null"]
            if len(real) != 1:
                msg = (
                    f"json schema `{path}`: expected `{key}` of one type and optionally null; "
                    f"got {len(real)} non-null alternatives (hint: pass an Arrow schema)"
                )
                raise SchemaError(msg)
            t, _ = _type_of(real[0], root, path)
            return t, len(real) != len(options)
    types = node.get("type")
    if types is None and "enum" in node:
        types = sorted({json_type(v) for v in node["enum"]})
    if types is None and "const" in node:
        types = json_type(node["const"])
    if types is None:
        types = "object" if "properties" in node else None
    if types is None:
        msg = (
            f"json schema `{path}`: expected a `type`; got none "
            f"(hint: add one or pass an Arrow schema)"
        )
        raise SchemaError(msg)
    names: list[str] = [types] if isinstance(types, str) else list(types)
    nullable = "null" in names
    kinds = [t for t in names if t != "null"]
    if kinds == ["number", "integer"] or kinds == ["integer", "number"]:
        kinds = ["number"]
    if len(kinds) != 1:
        msg = f"json schema `{path}`: expected one non-null type; got {names!r}"
        raise SchemaError(msg)
    kind = kinds[0]
    if kind in _PRIMITIVES:
        if kind == "string" and node.get("format") in _FORMATS:
            return _FORMATS[node["format"]], nullable
        return _PRIMITIVES[kind], nullable
    if kind == "array":
        items = node.get("items")
        if not isinstance(items, Mapping):
            msg = f"json schema `{path}`: expected `items` with one schema for an array"
            raise SchemaError(msg)
        inner, _ = _type_of(items, root, f"{path}[]")
        return pa.list_(inner), nullable
    if kind == "object":
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if not props and isinstance(extra, Mapping):
            value, _ = _type_of(extra, root, f"{path}{{}}")
            return pa.map_(pa.string(), value), nullable
        if not props:
            msg = (
                f"json schema `{path}`: expected `properties` or an `additionalProperties` "
                f"schema for an object"
            )
            raise SchemaError(msg)
        return pa.struct(_fields(node, root, path)), nullable
    msg = f"json schema `{path}`: unsupported type {kind!r}"
    raise SchemaError(msg)


def _fields(node: Mapping[str, Any], root: Mapping[str, Any], path: str) -> list[pa.Field]:
    required = set(node.get("required", ()))
    out = []
    for name, sub in node["properties"].items():
        t, admits_null = _type_of(sub, root, f"{path}.{name}" if path else name)
        out.append(pa.field(name, t, nullable=admits_null or name not in required))
    return out


def shape_from_json_schema(doc: Mapping[str, Any]) -> JsonShape:
    """Map a JSON Schema document (an object schema) to Arrow.

    Raises:
        SchemaError: On a construct with no faithful Arrow type, naming its path.
    """
    top = root_object(doc)
    return JsonShape(pa.schema(_fields(top, doc, "")), top.get("additionalProperties") is False)


def shape_from_arrow(schema: pa.Schema) -> JsonShape:
    """Use an Arrow schema as given (non-nullable fields are required).

    Raises:
        SchemaError: When a struct (or the schema) names two fields alike: a JSON
            object has one value per key, so one of them could never be filled.
    """
    _unique_names(list(schema), "the schema")
    return JsonShape(schema, strict=False)


def _unique_names(fields: list[pa.Field], where: str) -> None:
    seen: set[str] = set()
    for f in fields:
        if f.name in seen:
            msg = (
                f"json codec: field `{f.name}` appears twice in {where}; a JSON object "
                f"has one value per key, so rename one of them"
            )
            raise SchemaError(msg)
        seen.add(f.name)
        _unique_in_type(f.type, f"`{f.name}`")


def _unique_in_type(t: pa.DataType, where: str) -> None:
    if pa.types.is_struct(t):
        _unique_names(list(t), where)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        _unique_in_type(t.value_type, where)
    elif pa.types.is_map(t):
        _unique_in_type(t.item_type, where)
