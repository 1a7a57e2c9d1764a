"""Avro (parsed with fastavro) -> the neutral schema model.

Follows the Avro codec's mapping (docs/codecs-avro.md) so the model describes exactly
what the codec decodes to. Kept nowhere: defaults, aliases, ``order`` and field
positions (named in the model's losses when the schema uses them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import fastavro

from thalweg_bytewax.errors import SchemaError
from thalweg_bytewax.schemamodel._model import Kind, SchemaField, SchemaModel, SchemaType

__all__ = ["from_avro"]

_PRIMITIVES = {
    "null": Kind.NULL,
    "boolean": Kind.BOOLEAN,
    "int": Kind.INT32,
    "long": Kind.INT64,
    "float": Kind.FLOAT32,
    "double": Kind.FLOAT64,
    "bytes": Kind.BYTES,
    "string": Kind.STRING,
}
_LOGICAL: dict[tuple[str, Any], Kind] = {
    ("int", "date"): Kind.DATE,
    ("int", "time-millis"): Kind.TIME_MILLIS,
    ("long", "time-micros"): Kind.TIME_MICROS,
    ("long", "timestamp-millis"): Kind.TIMESTAMP_MILLIS,
    ("long", "timestamp-micros"): Kind.TIMESTAMP_MICROS,
    ("long", "local-timestamp-millis"): Kind.LOCAL_TIMESTAMP_MILLIS,
    ("long", "local-timestamp-micros"): Kind.LOCAL_TIMESTAMP_MICROS,
    ("string", "uuid"): Kind.UUID,
}


class _Reader:
    def __init__(self) -> None:
        self.named: dict[str, SchemaType] = {}
        self.losses: list[str] = []

    def type_of(self, node: Any, path: str) -> tuple[SchemaType, bool]:  # noqa: C901, PLR0911
        """The type of ``node`` and whether it admits null."""
        if isinstance(node, str):
            if node in _PRIMITIVES:
                return SchemaType(_PRIMITIVES[node]), node == "null"
            if node in self.named:
                return self.named[node], False
            msg = f"avro schema `{path}`: unknown type {node!r}; define it before use"
            raise SchemaError(msg)
        if isinstance(node, list):
            real = [b for b in node if b != "null"]
            if len(real) == 1:
                one, _ = self.type_of(real[0], path)
                return one, len(real) != len(node)
            branches = tuple(self.type_of(b, path)[0] for b in real)
            return SchemaType(Kind.UNION, branches=branches), len(real) != len(node)
        if not isinstance(node, Mapping):
            msg = f"avro schema `{path}`: expected a type; got {node!r}"
            raise SchemaError(msg)
        t = node.get("type")
        logical = node.get("logicalType")
        if isinstance(t, str) and (t, logical) in _LOGICAL:
            return SchemaType(_LOGICAL[(t, logical)]), False
        if logical == "decimal" and t in ("bytes", "fixed") and "precision" in node:
            return SchemaType(
                Kind.DECIMAL, precision=int(node["precision"]), scale=int(node.get("scale", 0))
            ), False
        if t == "record" or t == "error":
            name = str(node.get("name", ""))
            fields = tuple(self.field(f, f"{path}.{f['name']}" if path else f["name"])
                           for f in node["fields"])
            out = SchemaType(Kind.OBJECT, name=name, fields=fields)
            self.named[name] = out
            return out, False
        if t == "enum":
            out = SchemaType(Kind.ENUM, name=str(node.get("name")), symbols=tuple(node["symbols"]))
            self.named[str(node.get("name"))] = out
            return out, False
        if t == "fixed":
            out = SchemaType(Kind.FIXED, name=str(node.get("name")), size=int(node["size"]))
            self.named[str(node.get("name"))] = out
            return out, False
        if t == "array":
            item, null = self.type_of(node["items"], f"{path}[]")
            return SchemaType(Kind.ARRAY, items=item, items_required=not null), False
        if t == "map":
            val, null = self.type_of(node["values"], f"{path}{{}}")
            return SchemaType(Kind.MAP, items=val, items_required=not null), False
        return self.type_of(t, path)

    def field(self, f: Mapping[str, Any], path: str) -> SchemaField:
        t, null = self.type_of(f["type"], path)
        if "default" in f:
            self.losses.append(f"{path}: the default value {f['default']!r} is not kept")
        return SchemaField(str(f["name"]), t, required=not null, description=f.get("doc"))


def from_avro(schema: str | Mapping[str, Any]) -> SchemaModel:
    """The neutral model of an Avro record schema (JSON text or parsed).

    Raises:
        SchemaError: When the schema does not parse or is not a record.
    """
    import json  # noqa: PLC0415

    doc = json.loads(schema) if isinstance(schema, str) else schema
    try:
        parsed = fastavro.parse_schema(dict(doc), _write_hint=False, _force=True)
    except (fastavro.schema.SchemaParseException, ValueError, TypeError, KeyError) as exc:
        msg = f"avro schema: does not parse ({exc}); check it with fastavro.parse_schema"
        raise SchemaError(msg) from exc
    if not isinstance(parsed, Mapping) or parsed.get("type") != "record":
        msg = "avro schema: expected a top-level `record`; got another type"
        raise SchemaError(msg)
    reader = _Reader()
    top, _ = reader.type_of(parsed, "")
    return SchemaModel(
        name=str(parsed.get("name")),
        fields=top.fields,
        description=parsed.get("doc"),
        source_format="avro",
        losses=tuple(reader.losses),
    )
