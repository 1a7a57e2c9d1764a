"""Avro writer schemas, compiled once, and how each maps onto the output schema.

Private to :mod:`thalweg_bytewax.codecs.avro`: parsing (references included), the
per-writer :class:`_Writer` and per-output :class:`_Plan`, type promotion, and reading
one record with fastavro.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import fastavro
import pyarrow as pa
from fastavro.read import SchemaResolutionError

from thalweg_bytewax.codecs._avro_types import AvroNode
from thalweg_bytewax.codecs.base import FailureKind
from thalweg_bytewax.errors import DecodeError, SchemaError
from thalweg_bytewax.registry import ResolvedSchema, SchemaKey

logger = logging.getLogger(__name__)

_FIXED_KEY = "fixed"
_PROMOTIONS = {
    ("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
    ("long", "double"), ("float", "double"), ("string", "bytes"), ("bytes", "string"),
}  # fmt: skip


class AvroDecodeError(DecodeError):
    """One Avro payload failed to decode; ``kind`` says why."""

    __module__ = "thalweg_bytewax.codecs.avro"


@dataclass
class _Writer:
    """One writer schema, parsed and compiled once."""

    key: SchemaKey
    label: str
    parsed: Any
    node: AvroNode
    named: dict[str, Any]
    raw: Any
    reserved: list[str]
    error: AvroDecodeError | None = None
    header: bytes | None = None
    fast: bool = False
    plans: dict[int, _Plan] = field(default_factory=dict)


@dataclass
class _Plan:
    """How one writer's records map onto one output schema."""

    reader: Any  # the fastavro reader schema (None: decode with the writer alone)
    columns: list[int | None]  # per output field: writer field index, or None (null)
    fast: bool
    error: str | None = None


def _load_json(schema: str | Mapping[str, Any] | Sequence[Any]) -> Any:
    if isinstance(schema, str):
        try:
            return json.loads(schema)
        except json.JSONDecodeError:
            return schema  # a bare primitive name such as "long"
    return schema


def _parse(doc: Any, refs: Mapping[str, Any], label: str) -> tuple[Any, dict[str, Any]]:
    named: dict[str, Any] = {}
    try:
        for ref in refs.values():
            fastavro.parse_schema(ref, named_schemas=named)
        parsed = fastavro.parse_schema(doc, named_schemas=named)
    except Exception as exc:  # fastavro raises several types for bad schemas
        msg = f"avro {label}: cannot parse the schema ({type(exc).__name__}: {exc})"
        raise SchemaError(msg) from exc
    return parsed, named


def _ref_docs(resolved: ResolvedSchema) -> dict[str, Any]:
    return {name: json.loads(r.schema_str) for name, r in resolved.references.items()}


_NAMED = frozenset({"record", "enum", "fixed"})


def _same(a: AvroNode, b: AvroNode, *, names: bool = False) -> bool:
    """Whether values of writer type ``a`` are unchanged as reader type ``b``.

    With ``names``, named types (records, enums, fixed) must also have the same full
    name: Avro resolution matches a reader's named type by name or alias, which only the
    exact path (fastavro) implements, so a renamed or aliased type never takes the fast
    path and both paths give the exact path's answer.
    """
    if a.kind == "nullable" and b.kind == "nullable":
        return _same(a.children[0], b.children[0], names=names)
    if b.kind == "nullable" and a.kind != "nullable":
        return _same(a, b.children[0], names=names)
    if a.kind != b.kind or a.arrow != b.arrow or a.symbols != b.symbols:
        return False
    if names and (a.kind in _NAMED or a.size) and a.name != b.name:
        return False
    if a.kind == "record" and a.field_names != b.field_names:
        return False
    return all(_same(x, y, names=names) for x, y in zip(a.children, b.children, strict=False))


def _make_plan(w: _Writer, target: _Writer, reader: _Writer | None) -> _Plan:
    """How ``w``'s records map onto ``target``'s output schema (cached on ``w``)."""
    plan = w.plans.get(id(target))
    if plan is not None:
        return plan
    wf = dict(zip(w.node.field_names, w.node.children, strict=False))
    windex = {n: i for i, n in enumerate(w.node.field_names)}
    if reader is not None:
        same = w.node.name == target.node.name and all(
            n in wf and _same(wf[n], c, names=True)
            for n, c in zip(target.node.field_names, target.node.children, strict=False)
        )
        cols = [windex.get(n) for n in target.node.field_names]
        plan = _Plan(reader.parsed, cols, fast=w.fast and same)
    elif target is w:
        plan = _Plan(None, list(range(len(w.node.field_names))), fast=w.fast)
    else:
        plan = _Plan(None, [windex.get(n) for n in target.node.field_names], fast=w.fast)
        tf = dict(zip(target.node.field_names, target.node.children, strict=False))
        extra = [n for n in w.node.field_names if n not in tf]
        changed = [n for n in w.node.field_names if n in tf and not _promotable(wf[n], tf[n])]
        if extra or changed:
            what = ", ".join(f"`{n}`" for n in extra + changed)
            plan.error = (
                f"avro {w.label}: field(s) {what} are missing from or typed differently in "
                f"the newest writer {target.label}, so its records cannot take the "
                f"output schema without losing data; pass reader_schema= to choose one"
            )
        plan.fast = plan.fast and all(_same(wf[n], tf[n]) for n in wf if n in tf)
    w.plans[id(target)] = plan
    return plan


def _read(w: _Writer, body: bytes | memoryview, reader: Any) -> dict[str, Any]:
    buf = io.BytesIO(body)
    try:
        rec = fastavro.schemaless_reader(
            buf, w.parsed, reader, return_named_type=True, return_named_type_override=True
        )
    except SchemaResolutionError as exc:
        msg = f"avro {w.label}: cannot resolve to the reader schema ({exc})"
        raise AvroDecodeError(msg, FailureKind.SCHEMA_MISMATCH) from exc
    except (EOFError, StopIteration) as exc:
        raise AvroDecodeError(_truncated_text(w.label, len(body))) from exc
    except UnicodeDecodeError as exc:
        msg = f"avro {w.label}: invalid UTF-8 in a string field ({exc.reason} at byte {exc.start})"
        raise AvroDecodeError(msg) from exc
    except IndexError as exc:
        # fastavro reading a varint past the body's end indexes an empty read: a body
        # that ends inside its record, as EOFError says anywhere else.
        if buf.tell() >= len(body):
            raise AvroDecodeError(_truncated_text(w.label, len(body))) from exc
        error = f"{type(exc).__name__}: {exc}"
        raise AvroDecodeError(_mismatch_text(w.label, buf.tell(), len(body), error)) from exc
    except Exception as exc:  # fastavro raises ValueError, ... on bad bytes
        error = f"{type(exc).__name__}: {exc}"
        raise AvroDecodeError(_mismatch_text(w.label, buf.tell(), len(body), error)) from exc
    if buf.tell() != len(body):
        raise AvroDecodeError(_leftover_text(w.label, buf.tell(), len(body)))
    # fastavro types the result as any Avro value; a record schema decodes to a dict.
    return cast("dict[str, Any]", rec)


def _truncated_text(label: str, size: int) -> str:
    """The reject text of a body that ends inside its record (fastavro's EOFError)."""
    return f"avro {label}: body truncated, {size} bytes end inside a record"


def _leftover_text(label: str, read: int, size: int) -> str:
    """The reject text of a body with bytes after its record."""
    return (
        f"avro {label}: {size - read} bytes left over after the record "
        f"(read {read} of {size}); the body does not match the writer schema"
    )


def _mismatch_text(label: str, at: int, size: int, error: str) -> str:
    """The reject text of a body fastavro stopped reading with ``error`` at byte ``at``."""
    return (
        f"avro {label}: body does not match the writer schema at byte {at} of {size} "
        f"({error})"
    )


def _named_docs(w: _Writer) -> dict[str, Any]:
    return {k: v for k, v in w.named.items() if isinstance(v, dict)}


def _widens(w: _Writer, current: _Writer) -> bool:
    """Whether every record of ``current`` maps onto ``w`` without loss, and ``w`` differs."""
    wf = dict(zip(w.node.field_names, w.node.children, strict=False))
    pairs = list(zip(current.node.field_names, current.node.children, strict=False))
    if not all(n in wf and _promotable(c, wf[n]) for n, c in pairs):
        return False
    return len(wf) > len(pairs) or not all(_same(c, wf[n]) for n, c in pairs)


def _newer(w: _Writer, current: _Writer) -> bool:
    """Whether writer ``w`` replaces ``current`` as the output schema (no reader schema).

    Registry ids grow with registration, so a higher id is newer. GUIDs carry no order,
    and a lagging producer can show an old GUID after a new one: a GUID writer (or any
    mix of GUID and id) replaces the current output schema only when it widens it, i.e.
    every field of the current one is present in ``w`` with the same or a promoted
    type. Otherwise the wider schema stays and ``w``'s records are resolved onto it
    (absent fields null, a field the output lacks a ``schema_mismatch``), so no field
    is ever dropped from the output.
    """
    if isinstance(w.key, int) and isinstance(current.key, int):
        return w.key > current.key
    return _widens(w, current)


def _promotable(w: AvroNode, t: AvroNode) -> bool:
    if _same(w, t):
        return True
    wi = w.children[0] if w.kind == "nullable" else w
    ti = t.children[0] if t.kind == "nullable" else t
    return (wi.name, ti.name) in _PROMOTIONS and wi.kind == ti.kind == "prim"


class _OneLine:
    """Lazy one-line rendering of a schema for log messages."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __str__(self) -> str:
        obj = self._obj
        if isinstance(obj, AvroNode):
            obj = pa.schema(
                [c.arrow_field(n) for n, c in zip(obj.field_names, obj.children, strict=False)]
            )
        return ", ".join(f"{f.name}: {f.type}{'' if f.nullable else ' not null'}" for f in obj)
