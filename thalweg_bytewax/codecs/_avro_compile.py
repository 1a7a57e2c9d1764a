"""Compile a parsed Avro schema into its tree of :class:`AvroNode`: the one Avro → Arrow mapping.

Mapping (see docs/codecs-avro.md):

* ``null`` → ``null``; ``boolean`` → ``bool``; ``int`` → ``int32``; ``long`` → ``int64``;
  ``float`` → ``float32``; ``double`` → ``float64``; ``string`` → ``string``;
  ``bytes`` → ``binary``; ``fixed(n)`` → ``fixed_size_binary(n)``;
* ``enum`` → ``string`` (the symbol);
* ``record`` → ``struct``; ``array<T>`` → ``list<item: T>``; ``map<V>`` →
  ``map<string, V>``;
* ``["null", T]`` (either order) → nullable ``T``; any other union → ``dense_union`` with
  one child per branch, named after the branch (``null`` branches as a ``null`` child);
* logical types: ``decimal(p, s)`` → ``decimal128(p, s)`` (``decimal256`` above 38
  digits); ``date`` → ``date32``; ``time-millis`` → ``time32[ms]``; ``time-micros`` →
  ``time64[us]``; ``timestamp-millis|micros`` → ``timestamp[ms|us, tz=UTC]``;
  ``local-timestamp-millis|micros`` → ``timestamp[ms|us]`` (no zone); ``uuid`` →
  ``string``. Logical types the decoder does not implement (``timestamp-nanos``,
  ``duration``) keep their underlying type, as the Avro specification says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from thalweg_bytewax.codecs._avro_types import AvroNode
from thalweg_bytewax.errors import SchemaError

__all__ = ["compile_schema", "reserved_fields"]

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_LOGICAL: dict[tuple[str, str], pa.DataType] = {
    ("int", "date"): pa.date32(),
    ("int", "time-millis"): pa.time32("ms"),
    ("long", "time-micros"): pa.time64("us"),
    ("long", "timestamp-millis"): pa.timestamp("ms", tz="UTC"),
    ("long", "timestamp-micros"): pa.timestamp("us", tz="UTC"),
    ("long", "local-timestamp-millis"): pa.timestamp("ms"),
    ("long", "local-timestamp-micros"): pa.timestamp("us"),
    ("string", "uuid"): pa.string(),
}


def _full_name(node: Mapping[str, Any]) -> str:
    name = str(node.get("name", ""))
    ns = node.get("namespace")
    return name if "." in name or not ns else f"{ns}.{name}"


class _Compiler:
    def __init__(self, named: Mapping[str, Any]) -> None:
        self._named = dict(named)
        self._stack: list[str] = []
        self._path: list[str] = []  # field names down to the type being compiled

    def compile(self, node: Any) -> AvroNode:  # noqa: PLR0911, PLR0912 - one case per Avro type
        if isinstance(node, str):
            if node in _PRIMITIVES:
                return AvroNode("prim", _PRIMITIVES[node], node, name=node)
            if node not in self._named:
                msg = f"avro schema: unknown named type `{node}`"
                raise SchemaError(msg)
            return self.compile(self._named[node])
        if isinstance(node, list):
            return self._union(node)
        if not isinstance(node, dict):
            msg = f"avro schema: expected a type name, union or object; got {node!r}"
            raise SchemaError(msg)
        t = node.get("type")
        logical = node.get("logicalType")
        if t in ("record", "error"):
            return self._record(node)
        if t == "enum":
            return AvroNode(
                "enum", pa.string(), node, name=_full_name(node), symbols=tuple(node["symbols"])
            )
        if t == "fixed":
            size = int(node["size"])
            if logical == "decimal" and "precision" in node:
                return self._decimal(node, size=size)
            return AvroNode("fixed", pa.binary(size), node, name=_full_name(node), size=size)
        if t == "array":
            item = self.compile(node["items"])
            arrow = pa.list_(item.arrow_field("item"))
            return AvroNode("array", arrow, node, name="array", children=[item], simple=item.simple)
        if t == "map":
            val = self.compile(node["values"])
            arrow = pa.map_(pa.string(), val.arrow_field("value"))
            return AvroNode("map", arrow, node, name="map", children=[val], simple=val.simple)
        if isinstance(t, str) and t in _PRIMITIVES:
            if t == "bytes" and logical == "decimal" and "precision" in node:
                return self._decimal(node)
            mapped = _LOGICAL.get((t, logical)) if logical else None
            if mapped is not None:
                kind = "uuid" if logical == "uuid" else "prim"
                return AvroNode(kind, mapped, node, name=t, simple=kind == "prim")
            return AvroNode("prim", _PRIMITIVES[t], node, name=t)
        return self.compile(t)

    def _decimal(self, node: Mapping[str, Any], size: int = 0) -> AvroNode:
        precision = int(node["precision"])
        scale = int(node.get("scale", 0))
        arrow = (
            pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        )
        name = _full_name(node) if size else "bytes"
        return AvroNode("decimal", arrow, node, name=name, size=size)

    def _record(self, node: Mapping[str, Any]) -> AvroNode:
        full = _full_name(node)
        if full in self._stack:
            msg = f"avro schema: recursive type `{full}` cannot map to a fixed Arrow schema"
            raise SchemaError(msg)
        self._named.setdefault(full, node)
        self._stack.append(full)
        try:
            names = [f["name"] for f in node["fields"]]
            children = []
            for f in node["fields"]:
                self._path.append(f["name"])
                try:
                    children.append(self.compile(f["type"]))
                finally:
                    self._path.pop()
        finally:
            self._stack.pop()
        arrow = pa.struct([c.arrow_field(n) for n, c in zip(names, children, strict=False)])
        return AvroNode(
            "record",
            arrow,
            node,
            name=full,
            children=children,
            field_names=names,
            simple=all(c.simple for c in children),
        )

    def _union(self, branches: list[Any]) -> AvroNode:
        nodes = [self.compile(b) for b in branches]
        non_null = [n for n in nodes if not pa.types.is_null(n.arrow)]
        if len(nodes) == 1:
            return nodes[0]
        if len(non_null) == 1 and len(nodes) == 2:
            inner = non_null[0]
            return AvroNode(
                "nullable",
                inner.arrow,
                branches,
                name=inner.name,
                children=[inner],
                simple=inner.simple,
            )
        if not non_null:
            return AvroNode("prim", pa.null(), branches, name="null")
        self._check_distinct(nodes)
        # Children are nullable in the Arrow type because pyarrow builds dense unions
        # that way (UnionArray.from_dense takes no field nullability); values are never
        # null except in the `null` child.
        fields = [pa.field(n.name.rsplit(".", 1)[-1], n.arrow) for n in nodes]
        arrow = pa.union(fields, mode="dense", type_codes=list(range(len(nodes))))
        return AvroNode("union", arrow, branches, name="union", children=nodes, simple=False)

    def _check_distinct(self, nodes: list[AvroNode]) -> None:
        """Refuse a union whose branch cannot be told from the decoded value.

        fastavro does not report the branch index it read; the branch is inferred from
        the Python value (:meth:`AvroNode.branch_of`). Where two branches decode to the
        same kind of value (``int``/``long``, ``float``/``double``, two timestamp
        precisions, ``string``/``uuid`` ...) a value could land in the wrong branch, with
        a narrower type (a double read as float32, micros truncated to millis), so such
        a union is a :class:`SchemaError` naming the field.
        """
        tagged = sum(n.kind in _NAMED_KINDS or n.size > 0 for n in nodes) > 1
        seen: dict[Any, AvroNode] = {}
        for n in nodes:
            key = _value_class(n, tagged=tagged)
            other = seen.get(key)
            if other is not None:
                where = ".".join(self._path) or "<top level>"
                msg = (
                    f"avro schema: field `{where}`: union branches {_show(other)} and "
                    f"{_show(n)} decode to the same kind of value, so the branch a value was "
                    f"written with cannot be recovered exactly; keep one of them in the "
                    f"union (or make them distinct named types)"
                )
                raise SchemaError(msg)
            seen[key] = n


_NAMED_KINDS = frozenset({"record", "enum", "fixed"})


def _show(n: AvroNode) -> str:
    avro = n.avro
    if isinstance(avro, dict):
        logical = avro.get("logicalType")
        base = avro.get("name") or avro.get("type")
        return f"`{base}` ({logical})" if logical else f"`{base}`"
    return f"`{avro}`"


def _value_class(n: AvroNode, *, tagged: bool) -> Any:  # noqa: PLR0911 - one case per family
    """The kind of Python value fastavro returns for ``n`` inside a union."""
    named = n.kind in _NAMED_KINDS or n.size > 0
    if named and tagged:  # fastavro tags named branches when a union has several
        return ("named", n.name)
    t = n.arrow
    if n.kind in ("enum", "uuid") or pa.types.is_string(t):
        return "str"
    if n.kind in ("record", "map"):
        return "dict"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t):
        return "bytes"
    if pa.types.is_timestamp(t):
        return ("datetime", t.tz is None)
    if pa.types.is_time(t):
        return "time"
    if pa.types.is_decimal(t):
        return "decimal"
    return str(t.id) if n.kind != "array" else "list"


def compile_schema(parsed: Any, named: Mapping[str, Any] | None = None) -> AvroNode:
    """Compile a fastavro-parsed schema (and its named types) into an :class:`AvroNode`.

    Args:
        parsed: The output of ``fastavro.parse_schema`` (named types after their first
            use are referenced by full name).
        named: Named types by full name (fastavro's ``named_schemas``).

    Raises:
        SchemaError: On recursive types or unknown names.
    """
    return _Compiler(named or {}).compile(parsed)


def reserved_fields(node: AvroNode, prefix: str) -> list[str]:
    """Top-level record fields whose names fall under the reserved metadata prefix."""
    if node.kind != "record":
        return []
    return [n for n in node.field_names if n.startswith(prefix)]
