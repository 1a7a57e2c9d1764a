"""Protobuf message types ready to decode, decode errors and input normalisation.

Private to :mod:`thalweg_bytewax.codecs.protobuf`, which re-exports the public names.
"""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.unknown_fields import UnknownFieldSet

from thalweg_bytewax.codecs._proto_arrow import (
    MessagePlan,
    compile_plan,
)
from thalweg_bytewax.codecs.base import (
    FailureKind,
    HeadersInput,
    PayloadsInput,
)
from thalweg_bytewax.codecs.framing import FramingError
from thalweg_bytewax.errors import ConfigError, DecodeError

# The facade's logger name, so log configuration and filters keep working.
logger = logging.getLogger("thalweg_bytewax.codecs.protobuf")


class ProtobufDecodeError(DecodeError):
    """One Protobuf payload failed to decode; ``kind`` is its :class:`FailureKind`."""

    __module__ = "thalweg_bytewax.codecs.protobuf"


_FD = FieldDescriptor


def _sub_types(desc: Descriptor) -> list[tuple[FieldDescriptor, Descriptor]]:
    """Message-typed fields of ``desc`` (a map's value type for a map field)."""
    out: list[tuple[FieldDescriptor, Descriptor]] = []
    for fd in desc.fields:
        mt = fd.message_type
        if mt is None or fd.type not in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP):
            continue
        if mt.GetOptions().map_entry:
            vt = mt.fields_by_name["value"].message_type
            if vt is None:
                continue
            out.append((fd, vt))
        else:
            out.append((fd, mt))
    return out


def _reachable(desc: Descriptor) -> list[Descriptor]:
    seen: dict[str, Descriptor] = {}
    stack = [desc]
    while stack:
        d = stack.pop()
        if d.full_name in seen:
            continue
        seen[d.full_name] = d
        stack.extend(t for _, t in _sub_types(d))
    return list(seen.values())


def _has_closed_enum(desc: Descriptor) -> bool:
    return any(
        fd.type == _FD.TYPE_ENUM and fd.enum_type is not None and fd.enum_type.is_closed
        for fd in desc.fields
    )


class _Walk:
    """Where to look for declared field numbers among a message's unknown fields.

    upb keeps a field whose value the reader's descriptor cannot hold (a closed-enum
    number it does not declare, a wire type that differs) among the unknown fields;
    read as-is it would be a silent NULL or a dropped list element.
    """

    def __init__(self, desc: Descriptor, into: set[str], memo: dict[str, _Walk]) -> None:
        memo[desc.full_name] = self
        self.names = {fd.number: fd.name for fd in desc.fields}
        self.subs: list[tuple[str, bool, bool, _Walk]] = []
        for fd, sub in _sub_types(desc):
            if sub.full_name not in into:
                continue
            walk = memo.get(sub.full_name) or _Walk(sub, into, memo)
            is_map = fd.message_type is not sub
            self.subs.append((fd.name, fd.is_repeated and not is_map, is_map, walk))

    def find(self, m: Any, path: str) -> tuple[str, int] | None:
        ufs = UnknownFieldSet(m)
        names = self.names
        for k in range(len(ufs)):
            number = ufs[k].field_number
            if number in names:
                return f"{path}{names[number]}", number
        for name, repeated, is_map, walk in self.subs:
            if is_map:
                items: Any = getattr(m, name).values()
            elif repeated:
                items = getattr(m, name)
            elif m.HasField(name):
                items = (getattr(m, name),)
            else:
                continue
            for x in items:
                hit = walk.find(x, f"{path}{name}.")
                if hit is not None:
                    return hit
        return None


class _RowCheck:
    """Per-message checks the parser does not make: required fields, rejected values.

    Built once per type; ``needed`` is false (and nothing runs per row) for a type
    with no proto2 ``required`` field and no closed enum anywhere below it.
    """

    def __init__(self, desc: Descriptor) -> None:
        self.full_name = desc.full_name
        types = [d for d in _reachable(desc) if not d.full_name.startswith("google.protobuf.")]
        self.required = any(fd.is_required for d in types for fd in d.fields)
        # Sub-messages that hold a closed enum at or below them.
        closed = {d.full_name for d in types if _has_closed_enum(d)}
        grew = True
        while grew:
            grew = False
            for d in types:
                if d.full_name not in closed and any(
                    t.full_name in closed for _, t in _sub_types(d)
                ):
                    closed.add(d.full_name)
                    grew = True
        self.closed = desc.full_name in closed
        self.needed = self.required or self.closed
        self._walk = _Walk(desc, closed, {})
        self._deep = _Walk(desc, {d.full_name for d in types}, {})

    def ok(self, m: Any) -> bool:
        """Cheap verdict for the fast path (only called when ``needed``)."""
        if self.required and not m.IsInitialized():
            return False
        return not (self.closed and self._walk.find(m, "") is not None)

    def check(self, m: Any, *, reparsed: bool = False) -> None:
        """Raise when ``m`` misses a required field or holds a value it cannot read.

        ``reparsed``: ``m`` was re-read from an older writer's message, so every
        sub-message is searched and a hit is a ``schema_mismatch``.
        """
        kind = FailureKind.SCHEMA_MISMATCH if reparsed else FailureKind.MALFORMED
        if self.required and not m.IsInitialized():
            missing = ", ".join(m.FindInitializationErrors())
            msg = f"protobuf message `{self.full_name}` is missing required field(s): {missing}"
            raise ProtobufDecodeError(msg, kind)
        if not (self.closed or reparsed):
            return
        hit = (self._deep if reparsed else self._walk).find(m, "")
        if hit is None:
            return
        path, number = hit
        if reparsed:
            msg = (
                f"protobuf field `{path}` (number {number}) of the writer's schema does not "
                f"read as the reader's `{self.full_name}` (type changed incompatibly)"
            )
        else:
            msg = (
                f"protobuf field `{path}` (number {number}) holds a value its type does "
                f"not declare (closed-enum number or wrong wire type)"
            )
        raise ProtobufDecodeError(msg, kind)


class _Resolved:
    """One message type ready to decode: class, plan, reserved-field verdict."""

    def __init__(self, desc: Descriptor, max_depth: int, prefix: str, label: str) -> None:
        self.desc = desc
        self.cls = message_factory.GetMessageClass(desc)
        self.plan: MessagePlan = compile_plan(desc, max_depth=max_depth)
        self.check = _RowCheck(desc)
        self.reserved = [f.name for f in desc.fields if f.name.startswith(prefix)]
        if self.plan.capped:
            logger.warning(
                "protobuf codec: `%s` nests deeper than max_depth=%d (recursive types); "
                "these fields decode as JSON text past the cap: %s",
                desc.full_name,
                max_depth,
                ", ".join(self.plan.capped),
            )
        if self.reserved:
            logger.warning(
                "protobuf codec: `%s` (%s) declares fields under the reserved prefix `%s` "
                "(%s); every payload of it is a decode error",
                desc.full_name,
                label,
                prefix,
                ", ".join(self.reserved),
            )
        logger.info(
            "resolved protobuf decode schema `%s` (%s): %s",
            desc.full_name,
            label,
            self.plan.schema.to_string(show_schema_metadata=False).replace("\n", "; "),
        )

    def reserved_error(self) -> ProtobufDecodeError:
        msg = (
            f"protobuf message `{self.desc.full_name}` has field `{self.reserved[0]}` under "
            f"the reserved metadata prefix; rename the field or set `metadata_prefix`"
        )
        return ProtobufDecodeError(msg, FailureKind.RESERVED_FIELD)


def _reparse(target: _Resolved, msg: Any) -> Any:
    """Re-read a message of an older writer with the target's class, then check it."""
    try:
        # Partial: a missing required field is reported by the check, per row.
        out = target.cls.FromString(msg.SerializePartialToString())
    except Exception as exc:  # noqa: BLE001 - upb EncodeError / DecodeError
        text = (
            f"protobuf message of an older writer does not re-read as "
            f"`{target.desc.full_name}`: {exc}"
        )
        raise ProtobufDecodeError(text, FailureKind.SCHEMA_MISMATCH) from exc
    target.check.check(out, reparsed=True)
    return out


def _as_error(exc: Exception) -> ProtobufDecodeError:
    if isinstance(exc, ProtobufDecodeError):
        return exc
    kind = getattr(exc, "kind", FailureKind.MALFORMED)
    text = str(exc)
    if isinstance(exc, FramingError):
        text = f"protobuf framing: {text}"
    return ProtobufDecodeError(text, kind)


def _as_pylist(payloads: PayloadsInput) -> list[bytes | None]:
    if isinstance(payloads, pa.ChunkedArray):
        payloads = payloads.combine_chunks()
    if isinstance(payloads, pa.Array):
        values: list[bytes | None] = payloads.to_pylist()
        return values
    return list(payloads)


def _header_rows(headers: HeadersInput, n: int) -> list[Any] | None:
    if headers is None:
        return None
    rows = headers.to_pylist() if isinstance(headers, pa.Array) else list(headers)
    if len(rows) != n:
        msg = f"protobuf codec: expected {n} header rows (one per payload); got {len(rows)}"
        raise ConfigError(msg)
    out: list[Any] = []
    for r in rows:
        if r is None:
            out.append(None)
        else:
            out.append([(h["key"], h["value"]) if isinstance(h, dict) else tuple(h) for h in r])
    return out
