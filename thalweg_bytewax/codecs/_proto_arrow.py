"""Protobuf descriptor -> Arrow: the one type mapping, and both decode paths over it.

A :class:`MessagePlan` is compiled once per message type from its descriptor. It owns
the Arrow type of every field and two converters that walk the same plan:

* :meth:`MessagePlan.columns` — column-wise over a list of parsed messages: one list
  comprehension per field, numpy for timestamps / enums, ``pa.*Array.from_arrays`` for
  structs, lists and maps;
* :meth:`MessagePlan.to_dict` — one message to a ``dict`` equal to the batch row
  (``to_pylist(maps_as_pydicts="strict")``).

Mapping (see ``docs/codecs-protobuf-json.md``): scalars to the exact Arrow width, bytes
to binary, enums to their symbol as string, maps to ``map<K, V>``, repeated to ``list``,
messages to nullable structs, wrappers to nullable scalars, Timestamp to
``timestamp("us", "UTC")``, Duration to ``duration("us")``, ``google.protobuf.Struct``
/ ``Value`` / ``ListValue`` to JSON text. A message nested deeper than ``max_depth``
becomes JSON text too, counted in :class:`ProtoStats` and logged when it happens.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from thalweg_bytewax.codecs._proto_nodes import (
    _FD,
    _SCALARS,
    _WRAPPERS,
    ProtoStats,
    ValueOutOfRange,
    _Duration,
    _Enum,
    _JsonText,
    _Node,
    _Scalar,
    _String,
    _Timestamp,
    _Wrapper,
)
from thalweg_bytewax.errors import SchemaError

__all__ = ["MAX_SCHEMA_FIELDS", "MessagePlan", "ProtoStats", "ValueOutOfRange", "compile_plan"]

logger = logging.getLogger(__name__)

MAX_SCHEMA_FIELDS = 20_000
"""Refuse schemas that expand to more Arrow fields than this (a recursive type with two
self-references at depth 32 would expand to ~2^32 fields)."""

_JSON_TYPES = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)
_TIMESTAMP = "google.protobuf.Timestamp"
_DURATION = "google.protobuf.Duration"


# ---------------------------------------------------------------------------- nodes
# A node converts *element* values (no presence, no repetition) of one proto type; the
# leaf nodes live in _proto_nodes, the message node here because it holds a plan.


def _empty_struct(n: int, mask: np.ndarray | None) -> pa.Array:
    """``n`` values of an empty message: ``struct<>`` carries its length and nulls itself.

    ``StructArray.from_arrays`` takes the length from the children, and an empty
    message has none.
    """
    validity = None if mask is None else pa.array(~mask, pa.bool_()).buffers()[1]
    return pa.StructArray.from_buffers(pa.struct([]), n, [validity])


class _Message(_Node):
    def __init__(self, plan: MessagePlan) -> None:
        self.plan = plan
        self.arrow_type = pa.struct(plan.fields)

    def array(self, values: list[Any], mask: np.ndarray | None, stats: ProtoStats) -> pa.Array:
        if not values:  # e.g. a repeated field no row fills: no walk of the plan below
            return pa.array([], self.arrow_type)
        if not self.plan.fields:
            return _empty_struct(len(values), mask)
        children = self.plan.columns(values, stats)
        return pa.StructArray.from_arrays(
            children,
            fields=self.plan.fields,
            mask=None if mask is None else pa.array(mask, pa.bool_()),
        )

    def present(
        self, msgs: Sequence[Any], absent: np.ndarray, get: Callable[[Any], Any], stats: ProtoStats
    ) -> pa.Array:
        """The column of an optional sub-message, built over the rows that set it.

        Unset rows are never walked: the cost follows the data, not the size of the
        plan below this field (a recursive type compiles to thousands of fields).
        """
        n = len(msgs)
        unset = int(np.count_nonzero(absent))
        if unset == n:
            return pa.nulls(n, self.arrow_type)
        if 2 * unset <= n:  # mostly set: walking the defaults is cheaper than a take
            return self.array(list(map(get, msgs)), absent if unset else None, stats)
        values = list(map(get, compress(msgs, ~absent)))
        dense = self.array(values, None, stats)
        at = np.cumsum(~absent, dtype=np.int64) - 1
        return dense.take(pa.array(at, pa.int64(), mask=absent))

    def value(self, v: Any, stats: ProtoStats) -> Any:
        return self.plan.to_dict(v, stats)


# --------------------------------------------------------------------------- fields


@dataclass
class _FieldPlan:
    name: str
    node: _Node
    mode: str  # "plain" | "presence" | "repeated" | "map"
    arrow_field: pa.Field
    key_node: _Node | None = None
    get: Callable[[Any], Any] = field(init=False)

    def __post_init__(self) -> None:
        self.get = operator.attrgetter(self.name)

    def column(self, msgs: Sequence[Any], stats: ProtoStats) -> pa.Array:
        get, node = self.get, self.node
        if self.mode == "plain":
            return node.array(list(map(get, msgs)), None, stats)
        if self.mode == "presence":
            name = self.name
            mask = np.fromiter((not m.HasField(name) for m in msgs), np.bool_, len(msgs))
            if isinstance(node, _Message):
                return node.present(msgs, mask, get, stats)
            values = list(map(get, msgs))
            if isinstance(node, _Scalar):
                values = [None if k else v for v, k in zip(values, mask, strict=True)]
            return node.array(values, mask if mask.any() else None, stats)
        containers = list(map(get, msgs))
        offsets = np.zeros(len(msgs) + 1, np.int32)
        np.cumsum(np.fromiter(map(len, containers), np.int32, len(msgs)), out=offsets[1:])
        if self.mode == "repeated":
            flat = [x for c in containers for x in c]
            return pa.ListArray.from_arrays(
                pa.array(offsets), node.array(flat, None, stats), type=self.arrow_field.type
            )
        pairs = [kv for c in containers for kv in c.items()]
        key = self.key_node
        assert key is not None  # set for every map field
        keys = key.array([k for k, _ in pairs], None, stats)
        items = node.array([v for _, v in pairs], None, stats)
        return pa.MapArray.from_arrays(pa.array(offsets), keys, items, type=self.arrow_field.type)

    def value(self, m: Any, stats: ProtoStats) -> Any:
        v = self.get(m)
        node = self.node
        if self.mode == "plain":
            return node.value(v, stats)
        if self.mode == "presence":
            return node.value(v, stats) if m.HasField(self.name) else None
        if self.mode == "repeated":
            return [node.value(x, stats) for x in v]
        key = self.key_node
        assert key is not None  # set for every map field
        return {key.value(k, stats): node.value(x, stats) for k, x in v.items()}


@dataclass
class MessagePlan:
    """How one message type (at one nesting depth) maps to Arrow columns."""

    full_name: str
    plans: list[_FieldPlan]
    fields: list[pa.Field]
    capped: list[str]
    """Field paths collapsed to JSON text by the depth cap (for the start-up warning)."""

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of a top-level message of this type."""
        return pa.schema(self.fields)

    def columns(self, msgs: Sequence[Any], stats: ProtoStats) -> list[pa.Array]:
        """One Arrow array per field, over parsed messages."""
        return [p.column(msgs, stats) for p in self.plans]

    def record_batch(self, msgs: Sequence[Any], stats: ProtoStats) -> pa.RecordBatch:
        """Top-level messages as one batch of :attr:`schema`, one row per message.

        A message type without fields still yields ``len(msgs)`` rows.

        Raises:
            ValueOutOfRange: When a value has no Arrow form (nothing is counted then).
            pyarrow.ArrowException: When Arrow refuses the arrays (nothing is counted).
        """
        counted = ProtoStats()
        if self.fields:
            batch = pa.RecordBatch.from_arrays(self.columns(msgs, counted), schema=self.schema)
        else:
            batch = pa.RecordBatch.from_struct_array(_empty_struct(len(msgs), None))
        stats.add(counted)
        return batch

    def to_dict(self, m: Any, stats: ProtoStats) -> dict[str, Any]:
        """One parsed message as a dict, equal to its batch row."""
        return {p.name: p.value(m, stats) for p in self.plans}


class _Compiler:
    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.count = 0
        self.capped: list[str] = []
        self.root = ""

    def node(self, fd: FieldDescriptor, depth: int, path: str) -> _Node:
        if fd.type == _FD.TYPE_ENUM:
            return _Enum(fd, path)
        if fd.type == _FD.TYPE_STRING:
            return _String(path)
        if fd.type not in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP):
            return _Scalar(_SCALARS[fd.type])
        msg_type = fd.message_type
        assert msg_type is not None  # set on every message and group field
        name = msg_type.full_name
        if name in _WRAPPERS:
            return _Wrapper(_WRAPPERS[name], path)
        if name == _TIMESTAMP:
            return _Timestamp(path)
        if name == _DURATION:
            return _Duration(path)
        if name in _JSON_TYPES:
            return _JsonText(name, path, capped=False)
        if depth > self.max_depth:
            self.capped.append(f"{path} ({name})")
            return _JsonText(name, path, capped=True)
        return _Message(self.message(msg_type, depth, path))

    def message(self, desc: Descriptor, depth: int, path: str) -> MessagePlan:
        plans: list[_FieldPlan] = []
        for fd in desc.fields:
            self.count += 1
            if self.count > MAX_SCHEMA_FIELDS:
                msg = (
                    f"protobuf codec: `{self.root}` expands to more than {MAX_SCHEMA_FIELDS} "
                    f"Arrow fields at max_depth={self.max_depth} (recursive types); "
                    f"lower `max_depth`"
                )
                raise SchemaError(msg)
            sub = f"{path}.{fd.name}" if path else fd.name
            entry = fd.message_type if fd.is_repeated and fd.type == _FD.TYPE_MESSAGE else None
            if entry is not None and entry.GetOptions().map_entry:
                kfd, vfd = entry.fields_by_name["key"], entry.fields_by_name["value"]
                key, val = self.node(kfd, depth + 1, sub), self.node(vfd, depth + 1, sub)
                atype: pa.DataType = pa.map_(key.arrow_type, val.arrow_type)
                plans.append(_FieldPlan(fd.name, val, "map", pa.field(fd.name, atype, False), key))
                continue
            node = self.node(fd, depth + 1, sub)
            if fd.is_repeated:
                atype = pa.list_(node.arrow_type)
                plans.append(_FieldPlan(fd.name, node, "repeated", pa.field(fd.name, atype, False)))
            elif fd.has_presence and not fd.is_required:
                plans.append(
                    _FieldPlan(fd.name, node, "presence", pa.field(fd.name, node.arrow_type))
                )
            else:
                arrow_field = pa.field(fd.name, node.arrow_type, False)
                plans.append(_FieldPlan(fd.name, node, "plain", arrow_field))
        return MessagePlan(desc.full_name, plans, [p.arrow_field for p in plans], [])


def compile_plan(desc: Descriptor, *, max_depth: int) -> MessagePlan:
    """Compile the plan of top-level message ``desc``; names capped paths in ``capped``.

    Raises:
        SchemaError: When the schema expands past :data:`MAX_SCHEMA_FIELDS` fields.
    """
    comp = _Compiler(max_depth)
    comp.root = desc.full_name
    plan = comp.message(desc, 0, "")
    plan.capped = comp.capped
    return plan
