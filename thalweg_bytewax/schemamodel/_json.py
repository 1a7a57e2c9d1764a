"""JSON Schema -> the neutral schema model, following the JSON codec's mapping.

``string`` (``format: date-time`` / ``date`` / ``uuid``), ``integer`` (int64),
``number`` (float64), ``boolean``, ``array`` + ``items``, ``object`` + ``properties``,
``object`` + ``additionalProperties: <schema>`` (a map), ``["T", "null"]`` /
``anyOf [T, null]``, ``enum`` / ``const`` of strings, local ``$ref``. A property is
required when it is listed in ``required`` and its type does not admit null. Array
items and map values may be null (as the codec decodes them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thalweg_bytewax.errors import SchemaError
from thalweg_bytewax.schemamodel._json_schema_doc import json_type, resolve_ref, root_object
from thalweg_bytewax.schemamodel._model import Kind, SchemaField, SchemaModel, SchemaType

__all__ = ["from_json_schema"]

_PRIMITIVES = {
    "string": Kind.STRING,
    "integer": Kind.INT64,
    "number": Kind.FLOAT64,
    "boolean": Kind.BOOLEAN,
}
_FORMATS = {"date-time": Kind.TIMESTAMP_MICROS, "date": Kind.DATE}
_KEPT = frozenset(
    {"type", "properties", "required", "items", "additionalProperties", "description",
     "title", "enum", "const", "format", "$ref", "anyOf", "oneOf", "$schema", "$id",
     "$defs", "definitions"}
)


class _Reader:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.losses: list[str] = []

    def type_of(self, node: Mapping[str, Any], path: str) -> tuple[SchemaType, bool]:  # noqa: C901
        node = resolve_ref(node, self.root, path)
        extra = sorted(k for k in node if k not in _KEPT)
        if extra:
            self.losses.append(f"{path or '$'}: {', '.join(extra)} not kept")
        for key in ("anyOf", "oneOf"):
            if key in node:
                options = [resolve_ref(o, self.root, path) for o in node[key]]
                real = [o for o in options if o.get("type") != "null"]
                if len(real) != 1:
                    msg = f"json schema `{path}`: expected `{key}` of one type and null"
                    raise SchemaError(msg)
                t, _ = self.type_of(real[0], path)
                return t, len(real) != len(options)
        types = node.get("type")
        values = node.get("enum", [node["const"]] if "const" in node else None)
        symbolic = values is not None and all(isinstance(v, str) or v is None for v in values)
        if types is None and values is not None:
            types = sorted({json_type(v) for v in values})
        if types is None and "properties" in node:
            types = "object"
        names = [types] if isinstance(types, str) else list(types or [])
        kinds = [t for t in names if t != "null"]
        if sorted(kinds) == ["integer", "number"]:
            kinds = ["number"]
        if len(kinds) != 1:
            msg = f"json schema `{path}`: expected one non-null type; got {names!r}"
            raise SchemaError(msg)
        null = "null" in names
        kind = kinds[0]
        if symbolic and kind == "string":
            symbols = tuple(str(v) for v in values or () if v is not None)
            return SchemaType(Kind.ENUM, symbols=symbols), null
        if kind == "string" and node.get("format") in _FORMATS:
            return SchemaType(_FORMATS[node["format"]]), null
        if kind == "string" and node.get("format") == "uuid":
            return SchemaType(Kind.UUID), null
        if kind in _PRIMITIVES:
            return SchemaType(_PRIMITIVES[kind]), null
        if kind == "array" and isinstance(node.get("items"), Mapping):
            item, _ = self.type_of(node["items"], f"{path}[]")
            return SchemaType(Kind.ARRAY, items=item), null
        if kind == "object":
            props = node.get("properties")
            extra_props = node.get("additionalProperties")
            if not props and isinstance(extra_props, Mapping):
                val, _ = self.type_of(extra_props, f"{path}{{}}")
                return SchemaType(Kind.MAP, items=val), null
            if props:
                return SchemaType(Kind.OBJECT, fields=self.fields(node, path)), null
        msg = f"json schema `{path}`: unsupported {kind!r} (expected items or properties)"
        raise SchemaError(msg)

    def fields(self, node: Mapping[str, Any], path: str) -> tuple[SchemaField, ...]:
        required = set(node.get("required", ()))
        out = []
        for name, sub in node["properties"].items():
            t, null = self.type_of(sub, f"{path}.{name}" if path else name)
            desc = resolve_ref(sub, self.root, path).get("description")
            out.append(SchemaField(name, t, required=name in required and not null,
                                   description=desc))
        return tuple(out)


def from_json_schema(doc: Mapping[str, Any]) -> SchemaModel:
    """The neutral model of a JSON Schema document (a top-level object with properties).

    Raises:
        SchemaError: On a construct the JSON codec cannot decode, naming its path.
    """
    top = root_object(doc)
    reader = _Reader(doc)
    fields = reader.fields(top, "")
    return SchemaModel(
        name=str(top.get("title") or doc.get("$id") or "record"),
        fields=fields,
        description=top.get("description"),
        source_format="json-schema",
        losses=tuple(reader.losses),
    )
