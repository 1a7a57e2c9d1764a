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
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from thalweg_bytewax.errors import SchemaError

__all__ = ["MAX_SCHEMA_FIELDS", "MessagePlan", "ProtoStats", "ValueOutOfRange", "compile_plan"]

logger = logging.getLogger(__name__)

MAX_SCHEMA_FIELDS = 20_000
"""Refuse schemas that expand to more Arrow fields than this (a recursive type with two
self-references at depth 32 would expand to ~2^32 fields)."""

_FD = FieldDescriptor
_SCALARS: dict[int, pa.DataType] = {
    _FD.TYPE_DOUBLE: pa.float64(),
    _FD.TYPE_FLOAT: pa.float32(),
    _FD.TYPE_INT64: pa.int64(),
    _FD.TYPE_SINT64: pa.int64(),
    _FD.TYPE_SFIXED64: pa.int64(),
    _FD.TYPE_UINT64: pa.uint64(),
    _FD.TYPE_FIXED64: pa.uint64(),
    _FD.TYPE_INT32: pa.int32(),
    _FD.TYPE_SINT32: pa.int32(),
    _FD.TYPE_SFIXED32: pa.int32(),
    _FD.TYPE_UINT32: pa.uint32(),
    _FD.TYPE_FIXED32: pa.uint32(),
    _FD.TYPE_BOOL: pa.bool_(),
    _FD.TYPE_STRING: pa.string(),
    _FD.TYPE_BYTES: pa.binary(),
}
_WRAPPERS: dict[str, pa.DataType] = {
    "google.protobuf.DoubleValue": pa.float64(),
    "google.protobuf.FloatValue": pa.float32(),
    "google.protobuf.Int64Value": pa.int64(),
    "google.protobuf.UInt64Value": pa.uint64(),
    "google.protobuf.Int32Value": pa.int32(),
    "google.protobuf.UInt32Value": pa.uint32(),
    "google.protobuf.BoolValue": pa.bool_(),
    "google.protobuf.StringValue": pa.string(),
    "google.protobuf.BytesValue": pa.binary(),
}
_JSON_TYPES = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)
_TIMESTAMP = "google.protobuf.Timestamp"
_DURATION = "google.protobuf.Duration"
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
DURATION_TYPE = pa.duration("us")
# google.protobuf.Timestamp's documented range: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z.
_TS_MIN_S, _TS_MAX_S = -62_135_596_800, 253_402_300_799
# google.protobuf.Duration's documented range: +-10,000 years.
_DUR_MAX_S = 315_576_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ValueOutOfRange(ValueError):  # noqa: N818 - internal signal, never public
    """A value cannot be represented in its Arrow type (e.g. a Timestamp past 9999)."""


@dataclass
class ProtoStats:
    """Plain counters of one codec (exported by ``observability/``)."""

    decoded: int = 0
    """Payloads decoded into rows."""
    failed: int = 0
    """Payloads that became decode failures."""
    depth_capped: int = 0
    """Non-null sub-messages rendered as JSON text because they sat below ``max_depth``."""
    truncated_nanos: int = 0
    """Timestamps / Durations whose sub-microsecond nanos were dropped."""


# ---------------------------------------------------------------------------- nodes
# A node converts *element* values (no presence, no repetition) of one proto type.


class _Node:
    arrow_type: pa.DataType

    def array(self, values: list[Any], mask: np.ndarray | None, stats: ProtoStats) -> pa.Array:
        return pa.array(values, self.arrow_type, mask=mask)

    def value(self, v: Any, stats: ProtoStats) -> Any:
        return v


class _Scalar(_Node):
    def __init__(self, arrow_type: pa.DataType) -> None:
        self.arrow_type = arrow_type


class _Enum(_Node):
    arrow_type = pa.string()

    def __init__(self, fd: FieldDescriptor) -> None:
        self.names = {v.number: v.name for v in fd.enum_type.values}
        self._numbers = np.array(sorted(self.names), dtype=np.int64)
        self._symbols = pa.array([self.names[n] for n in self._numbers], pa.string())

    def array(self, values: list[Any], mask: np.ndarray | None, stats: ProtoStats) -> pa.Array:
        nums = np.fromiter(values, np.int64, len(values))
        pos = np.searchsorted(self._numbers, nums).clip(0, max(len(self._numbers) - 1, 0))
        known = self._numbers[pos] == nums if len(self._numbers) else np.zeros(len(nums), bool)
        if known.all():
            out = self._symbols.take(pa.array(pos))
            if mask is None:
                return out
            return pc.if_else(pa.array(mask), pa.scalar(None, pa.string()), out)
        # Open (proto3) enums may carry numbers the schema does not name: keep the number.
        return pa.array([self.value(v, stats) for v in values], pa.string(), mask=mask)

    def value(self, v: Any, stats: ProtoStats) -> Any:
        return self.names.get(v, str(v))


class _Wrapper(_Node):
    def __init__(self, arrow_type: pa.DataType) -> None:
        self.arrow_type = arrow_type

    def array(self, values: list[Any], mask: np.ndarray | None, stats: ProtoStats) -> pa.Array:
        return pa.array([w.value for w in values], self.arrow_type, mask=mask)

    def value(self, v: Any, stats: ProtoStats) -> Any:
        return v.value


def _micros(
    values: list[Any], lo: int, hi: int, what: str, stats: ProtoStats
) -> tuple[np.ndarray, int]:
    n = len(values)
    secs = np.fromiter(map(operator.attrgetter("seconds"), values), np.int64, n)
    nanos = np.fromiter(map(operator.attrgetter("nanos"), values), np.int64, n)
    if n and (secs.min() < lo or secs.max() > hi or np.abs(nanos).max() > 999_999_999):
        msg = f"{what} out of range"
        raise ValueOutOfRange(msg)
    sub = nanos % 1000
    return secs * 1_000_000 + np.sign(nanos) * (np.abs(nanos) // 1000), int(np.count_nonzero(sub))


def _micros_one(v: Any, lo: int, hi: int, what: str, stats: ProtoStats) -> int:
    s, ns = v.seconds, v.nanos
    if s < lo or s > hi or abs(ns) > 999_999_999:  # noqa: PLR2004
        msg = f"{what} seconds={s} nanos={ns} out of range"
        raise ValueOutOfRange(msg)
    if ns % 1000:
        stats.truncated_nanos += 1
    return s * 1_000_000 + (ns // 1000 if ns >= 0 else -(-ns // 1000))


class _Timestamp(_Node):
    arrow_type = TIMESTAMP_TYPE

    def array(self, values: list[Any], mask: np.ndarray | None, stats: ProtoStats) -> pa.Array:
        us, truncated = _micros(values, _TS_MIN_S, _TS_MAX_S, "Timestamp", stats)
        stats.truncated_nanos += truncated
        return pa.array(us, self.arrow_type, mask=mask)

    def value(self, v: Any, stats: ProtoStats) -> Any:
        return _EPOCH + timedelta(
            microseconds=_micros_one(v, _TS_MIN_S, _TS_MAX_S, "Timestamp", stats)
        )


class _Duration(_Node):
    arrow_type = DURATION_TYPE

    def array(self, values: list[Any], mask: np.ndarray | None, stats: ProtoStats) -> pa.Array:
        us, truncated = _micros(values, -_DUR_MAX_S, _DUR_MAX_S, "Duration", stats)
        stats.truncated_nanos += truncated
        return pa.array(us, self.arrow_type, mask=mask)

    def value(self, v: Any, stats: ProtoStats) -> Any:
        return timedelta(microseconds=_micros_one(v, -_DUR_MAX_S, _DUR_MAX_S, "Duration", stats))


class _JsonText(_Node):
    """A message rendered as compact JSON text (Struct / Value / ListValue, or capped)."""

    arrow_type = pa.string()

    def __init__(self, full_name: str, path: str, *, capped: bool) -> None:
        self.full_name = full_name
        self.path = path
        self.capped = capped
        self._warned = False

    def _render(self, v: Any) -> str:
        return json_format.MessageToJson(
            v, preserving_proto_field_name=True, indent=None, descriptor_pool=v.DESCRIPTOR.file.pool
        )

    def _bite(self, n: int, stats: ProtoStats) -> None:
        if self.capped and n:
            stats.depth_capped += n
            if not self._warned:
                self._warned = True
                logger.warning(
                    "protobuf decode hit max_depth at `%s` (`%s`): sub-messages below it are "
                    "JSON text; raise max_depth to keep them as structs",
                    self.path,
                    self.full_name,
                )

    def array(self, values: list[Any], mask: np.ndarray | None, stats: ProtoStats) -> pa.Array:
        if mask is None:
            out = [self._render(v) for v in values]
        else:
            out = [None if m else self._render(v) for v, m in zip(values, mask, strict=True)]
        self._bite(sum(1 for o in out if o is not None), stats)
        return pa.array(out, pa.string())

    def value(self, v: Any, stats: ProtoStats) -> Any:
        self._bite(1, stats)
        return self._render(v)


class _Message(_Node):
    def __init__(self, plan: MessagePlan) -> None:
        self.plan = plan
        self.arrow_type = pa.struct(plan.fields)

    def array(self, values: list[Any], mask: np.ndarray | None, stats: ProtoStats) -> pa.Array:
        children = self.plan.columns(values, stats)
        return pa.StructArray.from_arrays(
            children,
            fields=self.plan.fields,
            mask=None if mask is None else pa.array(mask, pa.bool_()),
        )

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
        keys = self.key_node.array([k for k, _ in pairs], None, stats)  # type: ignore[union-attr]
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
        return {key.value(k, stats): node.value(x, stats) for k, x in v.items()}  # type: ignore[union-attr]


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
        """One Arrow array per field, over parsed messages (never empty-safe issues)."""
        return [p.column(msgs, stats) for p in self.plans]

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
            return _Enum(fd)
        if fd.type not in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP):
            return _Scalar(_SCALARS[fd.type])
        name = fd.message_type.full_name
        if name in _WRAPPERS:
            return _Wrapper(_WRAPPERS[name])
        if name == _TIMESTAMP:
            return _Timestamp()
        if name == _DURATION:
            return _Duration()
        if name in _JSON_TYPES:
            return _JsonText(name, path, capped=False)
        if depth > self.max_depth:
            self.capped.append(f"{path} ({name})")
            return _JsonText(name, path, capped=True)
        return _Message(self.message(fd.message_type, depth, path))

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
            is_map = (
                fd.is_repeated
                and fd.type == _FD.TYPE_MESSAGE
                and fd.message_type.GetOptions().map_entry
            )
            if is_map:
                kfd, vfd = (
                    fd.message_type.fields_by_name["key"],
                    fd.message_type.fields_by_name["value"],
                )
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
