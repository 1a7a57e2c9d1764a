"""The one Avro → Arrow type mapping, and the value conversions both decode paths share.

An Avro schema (as parsed by fastavro) is compiled once into a tree of :class:`AvroNode`;
each node knows its exact Arrow type, how to normalise a fastavro value for
``decode_value`` and how to build an Arrow array from a column of fastavro values for
the exact ``decode_batch`` path. The fast path casts polars' output to the same types.

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

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa

from thalweg_bytewax.errors import SchemaError

__all__ = ["AvroNode", "compile_schema", "reserved_fields"]

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
_INT32 = (-(2**31), 2**31 - 1)


@dataclass
class AvroNode:
    """One compiled Avro type: its Arrow type and how to convert values to it.

    ``kind`` is one of ``prim``, ``uuid``, ``enum``, ``fixed``, ``decimal``, ``record``,
    ``array``, ``map``, ``nullable`` (``["null", T]``; ``children[0]`` is ``T``) and
    ``union``. ``simple`` is true when ``pa.array(values, type)`` builds the column from
    fastavro values unchanged, so no per-value Python work is needed.
    """

    kind: str
    arrow: pa.DataType
    avro: Any
    name: str = ""
    children: list[AvroNode] = field(default_factory=list)
    field_names: list[str] = field(default_factory=list)
    symbols: tuple[str, ...] = ()
    size: int = 0
    simple: bool = True

    @property
    def nullable(self) -> bool:
        """Whether values of this type may be null."""
        return (
            self.kind == "nullable"
            or pa.types.is_null(self.arrow)
            or (self.kind == "union" and any(c.arrow == pa.null() for c in self.children))
        )

    def arrow_field(self, name: str) -> pa.Field:
        """An Arrow field of this type (nullable exactly when the Avro type is)."""
        return pa.field(name, self.arrow, nullable=self.nullable)

    # -- record-at-a-time ----------------------------------------------------------

    def normalize(self, value: Any) -> Any:
        """A fastavro value as ``decode_value`` returns it (uuid as text, no union tags)."""
        if self.simple or value is None:
            return _untag(value)
        kind = self.kind
        if kind == "uuid":
            return str(value)
        if kind == "record":
            return {
                n: c.normalize(value[n])
                for n, c in zip(self.field_names, self.children, strict=False)
            }
        if kind == "array":
            item = self.children[0]
            return [item.normalize(v) for v in value]
        if kind == "map":
            val = self.children[0]
            return {k: val.normalize(v) for k, v in value.items()}
        if kind == "nullable":
            return self.children[0].normalize(value)
        if kind == "union":
            branch = self.branch_of(value)
            return self.children[branch].normalize(_untag(value))
        return value

    def branch_of(self, value: Any) -> int:
        """Which union branch a fastavro value belongs to (first branch that accepts it).

        Named branches come tagged ``(name, value)`` from fastavro when a union has more
        than one named type; otherwise the value's Python type decides. Unions with two
        branches that accept the same kind of value are refused when compiled, so the
        first branch that accepts a value is the one it was written with.
        """
        if isinstance(value, tuple):
            name = value[0]
            for i, c in enumerate(self.children):
                if c.name == name or c.name.rsplit(".", 1)[-1] == name:
                    return i
            value = value[1]
        for i, c in enumerate(self.children):
            if c.accepts(value):
                return i
        msg = f"avro: value of type {type(value).__name__} matches no branch of union {self.avro!r}"
        raise SchemaError(msg)

    def accepts(self, v: Any) -> bool:  # noqa: PLR0911 - one branch per Arrow type family
        """Whether a fastavro value could be of this type (union branch inference)."""
        t = self.arrow
        if v is None:
            return pa.types.is_null(t) or self.nullable
        if self.kind == "enum":
            return isinstance(v, str) and v in self.symbols
        if pa.types.is_boolean(t):
            return isinstance(v, bool)
        if pa.types.is_int32(t):
            return isinstance(v, int) and not isinstance(v, bool) and _INT32[0] <= v <= _INT32[1]
        if pa.types.is_int64(t):
            return isinstance(v, int) and not isinstance(v, bool)
        if pa.types.is_floating(t):
            return isinstance(v, float)
        if pa.types.is_string(t):
            return isinstance(v, str | uuid.UUID)
        if pa.types.is_binary(t):
            return isinstance(v, bytes)
        if pa.types.is_fixed_size_binary(t):
            return isinstance(v, bytes) and len(v) == self.size
        if pa.types.is_decimal(t):
            return isinstance(v, Decimal)
        if pa.types.is_timestamp(t):
            return isinstance(v, dt.datetime) and ((v.tzinfo is None) == (t.tz is None))
        if pa.types.is_date(t):
            return isinstance(v, dt.date) and not isinstance(v, dt.datetime)
        if pa.types.is_time(t):
            return isinstance(v, dt.time)
        if self.kind == "record":
            return isinstance(v, dict) and set(v) == set(self.field_names)
        if self.kind == "map":
            return isinstance(v, dict)
        if self.kind == "array":
            return isinstance(v, list)
        if self.kind == "nullable":
            return self.children[0].accepts(v)
        return False

    # -- columnar ------------------------------------------------------------------

    def build(self, values: Sequence[Any]) -> pa.Array:
        """An Arrow array of :attr:`arrow` type from a column of fastavro values."""
        if self.simple:
            return pa.array(values, type=self.arrow)
        kind = self.kind
        if kind == "uuid":
            return pa.array([None if v is None else str(v) for v in values], pa.string())
        if kind == "nullable":
            return self.children[0].build(values)
        mask = pa.array([v is None for v in values], pa.bool_())
        has_nulls = mask.true_count > 0 if len(values) else False
        if kind == "record":
            children = [
                c.build([None if v is None else v[n] for v in values])
                for n, c in zip(self.field_names, self.children, strict=False)
            ]
            fields = [
                c.arrow_field(n) for n, c in zip(self.field_names, self.children, strict=False)
            ]
            return pa.StructArray.from_arrays(
                children, fields=fields, mask=mask if has_nulls else None
            )
        if kind in ("array", "map"):
            offsets = [0]
            flat: list[Any] = []
            for v in values:
                if v is not None:
                    flat.extend(v.items() if kind == "map" else v)
                offsets.append(len(flat))
            off = pa.array(offsets, pa.int32())
            if kind == "array":
                return pa.ListArray.from_arrays(
                    off,
                    self.children[0].build(flat),
                    type=self.arrow,
                    mask=mask if has_nulls else None,
                )
            keys = pa.array([k for k, _ in flat], pa.string())
            items = self.children[0].build([x for _, x in flat])
            return pa.MapArray.from_arrays(
                off, keys, items, type=self.arrow, mask=mask if has_nulls else None
            )
        # dense union: group the values by branch, one child array per branch
        codes: list[int] = []
        offsets = []
        per_branch: list[list[Any]] = [[] for _ in self.children]
        for v in values:
            b = self.branch_of(v)
            codes.append(b)
            offsets.append(len(per_branch[b]))
            per_branch[b].append(_untag(v))
        children = [c.build(vals) for c, vals in zip(self.children, per_branch, strict=False)]
        return pa.UnionArray.from_dense(
            pa.array(codes, pa.int8()),
            pa.array(offsets, pa.int32()),
            children,
            [f.name for f in self.arrow],
            list(range(len(self.children))),
        )


def _untag(value: Any) -> Any:
    if isinstance(value, tuple):
        return value[1]
    return value


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
