"""What every reader of a JSON Schema document shares: local ``$ref`` and the root object.

The JSON codec (:mod:`thalweg_bytewax.codecs._json_schema`, JSON Schema to Arrow) and
the schema model (:mod:`thalweg_bytewax.schemamodel._json`, JSON Schema to ODCS) read
the same documents; they resolve references, type literals and check the top level
here, so both accept and refuse the same documents with the same words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thalweg_bytewax.errors import SchemaError

__all__ = ["json_type", "resolve_ref", "root_object"]

_MAX_REF_HOPS = 32  # a ref chain this long is a cycle


def resolve_ref(node: Mapping[str, Any], root: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    """``node``, or what its local ``$ref`` (``#/...``) chain points to in ``root``.

    Raises:
        SchemaError: When a reference is not local, does not resolve or is a cycle,
            naming ``path``.
    """
    seen = 0
    while "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            msg = f"json schema `{path}`: expected a local `$ref` (`#/...`); got {ref!r}"
            raise SchemaError(msg)
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if not isinstance(target, Mapping):
            msg = f"json schema `{path}`: `$ref` {ref!r} does not resolve"
            raise SchemaError(msg)
        node, seen = target, seen + 1
        if seen > _MAX_REF_HOPS:
            msg = f"json schema `{path}`: `$ref` cycle through {ref!r}"
            raise SchemaError(msg)
    return node


def json_type(value: Any) -> str:
    """The JSON Schema type of a literal (an ``enum`` or ``const`` value)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return "number" if isinstance(value, float) else "string"


def root_object(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """The document's top-level schema: an ``object`` with ``properties``.

    Raises:
        SchemaError: When the top level is anything else.
    """
    top = resolve_ref(doc, doc, "$")
    if top.get("type", "object") != "object" or not top.get("properties"):
        msg = "json schema: expected a top-level `object` with `properties`"
        raise SchemaError(msg)
    return top
