"""Avro codec: Confluent-framed (or header-framed, or bare) Avro into dicts or Arrow.

Writer schemas come from a :class:`~thalweg_bytewax.registry.SchemaSource` by the id in
the payload prefix or the GUID in the ``__value_schema_id`` header. Both paths share one
schema-resolution core (:mod:`thalweg_bytewax.codecs._avro_types`):

* ``decode_value`` reads one record with fastavro (writer schema, plus the reader schema
  when given) and returns a dict;
* ``decode_batch`` groups the payloads by writer schema and decodes each group either on
  the fast path (:mod:`thalweg_bytewax.codecs._avro_fast`, polars over an in-memory OCF,
  used only where proven exact) or on the exact path (fastavro, then Arrow built column
  by column from the same type tree). One output schema per batch: the reader schema
  when given; otherwise the newest writer schema seen (highest id), where fields an
  older writer lacks are null for its records. An older writer with a field the newest
  lacks, or a field of another type, is never silently narrowed: its records fail with
  ``schema_mismatch`` (pass ``reader_schema=`` to choose the output yourself).

Bad data never raises from ``decode_batch``: each failed row is a
:class:`~thalweg_bytewax.codecs.base.DecodeFailure`. An unreachable registry raises.
A body with bytes left over after its record is ``malformed`` (confluent-kafka's
deserializer ignores them; we do not, because they mean the body does not match its
writer schema).
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from fastavro.read import SchemaResolutionError

from thalweg_bytewax.codecs import _avro_fast
from thalweg_bytewax.codecs._avro_types import AvroNode, compile_schema, reserved_fields
from thalweg_bytewax.codecs._gc import gc_paused
from thalweg_bytewax.codecs.base import (
    DecodeFailure,
    DecodeResult,
    FailureKind,
    Framing,
    HeadersInput,
    PayloadsInput,
)
from thalweg_bytewax.codecs.framing import FramingError, peel, peel_confluent_batch
from thalweg_bytewax.errors import ConfigError, DecodeError, SchemaError
from thalweg_bytewax.metadata import DEFAULT_PREFIX
from thalweg_bytewax.registry import (
    ResolvedSchema,
    SchemaKey,
    SchemaSource,
    UnknownSchemaError,
    schema_source,
)

__all__ = ["AvroCodec", "AvroDecodeError"]

logger = logging.getLogger(__name__)

_FIXED_KEY = "fixed"
_PROMOTIONS = {
    ("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
    ("long", "double"), ("float", "double"), ("string", "bytes"), ("bytes", "string"),
}  # fmt: skip


class AvroDecodeError(DecodeError):
    """One Avro payload failed to decode; ``kind`` says why."""

    def __init__(self, message: str, kind: FailureKind = FailureKind.MALFORMED) -> None:
        super().__init__(message, kind)
        self.kind = kind

    def __str__(self) -> str:
        return str(self.args[0])


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


def _same(a: AvroNode, b: AvroNode) -> bool:
    """Whether values of writer type ``a`` are unchanged as reader type ``b``."""
    if a.kind == "nullable" and b.kind == "nullable":
        return _same(a.children[0], b.children[0])
    if b.kind == "nullable" and a.kind != "nullable":
        return _same(a, b.children[0])
    if a.kind != b.kind or a.arrow != b.arrow or a.symbols != b.symbols:
        return False
    if a.kind == "record" and a.field_names != b.field_names:
        return False
    return all(_same(x, y) for x, y in zip(a.children, b.children, strict=False))


class AvroCodec:
    """Decode Avro payloads to dicts (``decode_value``) or Arrow (``decode_batch``).

    Args:
        registry: Where writer schemas come from: a ``SchemaSource``, a
            ``SchemaRegistryClient``, a registry URL (``http(s)://`` or ``mock://``) or
            a directory of ``.avsc`` files. Not needed with ``framing="none"``.
        reader_schema: Optional reader schema (Avro JSON text or dict): every record is
            resolved to it (Avro schema evolution, defaults applied) and it is the
            output schema of every batch.
        framing: ``"confluent"`` (id prefix, or a schema-GUID header) or ``"none"``
            (bare bodies written with ``schema``).
        schema: The writer schema of bare bodies (``framing="none"``).
        metadata_prefix: The reserved metadata column prefix; a top-level payload field
            under it is a ``reserved_field`` decode failure for that schema.
        fast: Use the polars fast path where it is proven exact (needs the ``fast``
            extra; without polars everything runs on the exact path).

    Raises:
        ConfigError: On an inconsistent configuration.
        SchemaError: When ``reader_schema`` or ``schema`` cannot be parsed.

    Example:
        >>> codec = AvroCodec("mock://docs")
        >>> codec.name
        'avro'
    """

    def __init__(
        self,
        registry: Any = None,
        *,
        reader_schema: str | Mapping[str, Any] | None = None,
        framing: Framing | str = Framing.CONFLUENT,
        schema: str | Mapping[str, Any] | None = None,
        metadata_prefix: str = DEFAULT_PREFIX,
        fast: bool = True,
    ) -> None:
        try:
            self._framing = Framing(framing)
        except ValueError as exc:
            msg = f"avro codec: expected framing 'confluent' or 'none'; got {framing!r}"
            raise ConfigError(msg) from exc
        self._prefix = metadata_prefix
        self._fast = fast
        self._writers: dict[SchemaKey, _Writer] = {}
        self._order: list[SchemaKey] = []  # writer keys by first sight (GUID ordering)
        self._newest: _Writer | None = None
        self._optional: set[str] = set()  # newest-writer fields some older writer lacks
        self._logged_output: str | None = None
        self._source: SchemaSource | None = None
        if self._framing is Framing.CONFLUENT:
            if registry is None:
                msg = "avro codec: framing 'confluent' needs registry=; pass a URL or source"
                raise ConfigError(msg)
            self._source = schema_source(registry)
        elif schema is None and reader_schema is None:
            msg = "avro codec: framing 'none' needs schema= (the writer schema of the bodies)"
            raise ConfigError(msg)
        self._reader: _Writer | None = None
        if reader_schema is not None:
            self._reader = self._compile("reader", "reader schema", _load_json(reader_schema), {})
            if self._reader.error is not None:
                raise SchemaError(str(self._reader.error))
        if self._framing is Framing.NONE:
            doc = _load_json(schema if schema is not None else reader_schema)
            w = self._compile(_FIXED_KEY, "schema", doc, {})
            if w.error is not None and w.error.kind is not FailureKind.RESERVED_FIELD:
                raise SchemaError(str(w.error))
            self._writers[_FIXED_KEY] = w
            self._see(w)

    # -- schemas ------------------------------------------------------------------

    @property
    def name(self) -> str:
        """``avro``."""
        return "avro"

    def __repr__(self) -> str:
        src = self._source.description if self._source else None
        return f"AvroCodec(registry={src!r}, framing={self._framing.value!r})"

    def _compile(self, key: SchemaKey, label: str, doc: Any, refs: Mapping[str, Any]) -> _Writer:
        parsed, named = _parse(doc, refs, label)
        node = compile_schema(parsed, named)
        if node.kind != "record":
            msg = f"avro {label}: expected a record schema at the top level; got {node.avro!r}"
            raise SchemaError(msg)
        w = _Writer(key, label, parsed, node, named, doc, reserved_fields(node, self._prefix))
        if w.reserved:
            fields = ", ".join(f"`{n}`" for n in w.reserved)
            w.error = AvroDecodeError(
                f"avro {label}: field(s) {fields} fall under the reserved metadata prefix "
                f"`{self._prefix}`; rename them in the schema or configure another prefix",
                FailureKind.RESERVED_FIELD,
            )
        w.fast = self._fast and _avro_fast.supported(node)
        logger.info("avro %s: decodes to Arrow schema %s", label, _OneLine(node))
        return w

    def _writer(self, key: SchemaKey) -> _Writer:
        w = self._writers.get(key)
        if w is not None:
            return w
        label = f"schema id {key}" if isinstance(key, int) else f"schema guid {key}"
        assert self._source is not None  # noqa: S101 - framing confluent always has one
        try:
            resolved = self._source.get(key)
        except UnknownSchemaError as exc:
            msg = f"avro {label}: unknown to `{self._source.description}`"
            err = AvroDecodeError(msg, FailureKind.UNKNOWN_SCHEMA)
            err.__cause__ = exc
            # Not cached: the schema may be registered later (the source caches misses
            # only as long as it chooses to).
            return _Writer(key, label, None, AvroNode("prim", pa.null(), None), {}, None, [], err)
        try:
            if resolved.schema_type != "AVRO":
                msg = (
                    f"avro {label}: expected an AVRO schema; the registry has "
                    f"{resolved.schema_type}"
                )
                raise SchemaError(msg)
            w = self._compile(key, label, _load_json(resolved.schema_str), _ref_docs(resolved))
        except SchemaError as exc:
            w = _Writer(key, label, None, AvroNode("prim", pa.null(), None), {}, None, [])
            w.error = AvroDecodeError(str(exc), FailureKind.SCHEMA_MISMATCH)
        self._writers[key] = w
        if w.error is None:
            self._see(w)
        return w

    def _see(self, w: _Writer) -> None:
        """Track the newest writer (output schema without a reader schema)."""
        self._order.append(w.key)
        if self._reader is not None:
            return
        newest = self._newest
        if newest is None or _newer(w.key, newest.key, self._order):
            old = newest
            self._newest = w
            if old is not None:
                logger.info(
                    "avro: output schema changed from %s to %s (fields now: %s)",
                    old.label,
                    w.label,
                    ", ".join(w.node.field_names),
                )
        target = self._newest
        assert target is not None  # noqa: S101 - set just above
        for other in self._writers.values():
            if other.error is None and other is not target:
                self._optional |= set(target.node.field_names) - set(other.node.field_names)
        if w is not target:
            self._optional |= set(target.node.field_names) - set(w.node.field_names)

    @property
    def _target(self) -> _Writer | None:
        return self._reader or self._newest

    @property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema ``decode_batch`` produces now.

        The reader schema's when given, else the newest writer schema's seen so far.

        Raises:
            SchemaError: When there is no reader schema and no writer schema seen yet.
        """
        target = self._target
        if target is None:
            msg = "avro codec: no writer schema seen yet; pass reader_schema= or decode first"
            raise SchemaError(msg)
        fields = [
            c.arrow_field(n)
            for n, c in zip(target.node.field_names, target.node.children, strict=False)
        ]
        if self._reader is None:
            fields = [f.with_nullable(True) if f.name in self._optional else f for f in fields]
        return pa.schema(fields)

    def arrow_schema_for(self, schema_id: SchemaKey) -> pa.Schema:
        """The Arrow schema one writer schema decodes to on its own (``describe-schema``).

        Raises:
            SchemaError: When the schema is unknown or cannot be mapped.
        """
        w = self._writer(schema_id)
        if w.error is not None and w.error.kind is not FailureKind.RESERVED_FIELD:
            raise SchemaError(str(w.error))
        return pa.schema(
            [c.arrow_field(n) for n, c in zip(w.node.field_names, w.node.children, strict=False)]
        )

    def _plan(self, w: _Writer) -> _Plan:
        target = self._target
        assert target is not None  # noqa: S101 - a writer was seen
        plan = w.plans.get(id(target))
        if plan is not None:
            return plan
        wf = dict(zip(w.node.field_names, w.node.children, strict=False))
        windex = {n: i for i, n in enumerate(w.node.field_names)}
        if self._reader is not None:
            same = all(
                n in wf and _same(wf[n], c)
                for n, c in zip(target.node.field_names, target.node.children, strict=False)
            )
            cols = [windex.get(n) for n in target.node.field_names]
            plan = _Plan(self._reader.parsed, cols, fast=w.fast and same)
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

    # -- record-at-a-time -------------------------------------------------------------

    def _read(self, w: _Writer, body: bytes | memoryview, reader: Any) -> dict[str, Any]:
        buf = io.BytesIO(body)
        try:
            rec = fastavro.schemaless_reader(
                buf, w.parsed, reader, return_named_type=True, return_named_type_override=True
            )
        except SchemaResolutionError as exc:
            msg = f"avro {w.label}: cannot resolve to the reader schema ({exc})"
            raise AvroDecodeError(msg, FailureKind.SCHEMA_MISMATCH) from exc
        except (EOFError, StopIteration) as exc:
            msg = f"avro {w.label}: body truncated, {len(body)} bytes end inside a record"
            raise AvroDecodeError(msg) from exc
        except UnicodeDecodeError as exc:
            msg = (
                f"avro {w.label}: invalid UTF-8 in a string field "
                f"({exc.reason} at byte {exc.start})"
            )
            raise AvroDecodeError(msg) from exc
        except Exception as exc:  # fastavro raises IndexError, ValueError, ... on bad bytes
            msg = (
                f"avro {w.label}: body does not match the writer schema at byte "
                f"{buf.tell()} of {len(body)} ({type(exc).__name__}: {exc})"
            )
            raise AvroDecodeError(msg) from exc
        if buf.tell() != len(body):
            msg = (
                f"avro {w.label}: {len(body) - buf.tell()} bytes left over after the record "
                f"(read {buf.tell()} of {len(body)}); the body does not match the writer schema"
            )
            raise AvroDecodeError(msg)
        return rec  # type: ignore[no-any-return]

    def decode_value(
        self, payload: bytes | None, *, headers: Sequence[tuple[str, bytes | None]] | None = None
    ) -> dict[str, Any]:
        """Decode one payload to a dict, resolved to the reader schema when given.

        Values are as confluent-kafka's ``AvroDeserializer`` returns them, except that
        ``uuid`` is text (as in the Arrow column).

        Raises:
            AvroDecodeError: The payload is bad; ``kind`` says why.
            FramingError: The framing is bad.
            RegistryUnavailableError: The registry is unreachable.
        """
        if payload is None:
            msg = "avro: null payload (a tombstone) has no record to decode"
            raise AvroDecodeError(msg, FailureKind.NULL_PAYLOAD)
        if self._framing is Framing.NONE:
            w, offset = self._writers[_FIXED_KEY], 0
        else:
            ref = peel(payload, headers)
            w, offset = self._writer(ref.key), ref.body_offset
        if w.error is not None:
            raise w.error
        target = self._reader or w
        rec = self._read(
            w, memoryview(payload)[offset:], self._reader.parsed if self._reader else None
        )
        return target.node.normalize(rec)  # type: ignore[no-any-return]

    # -- columnar -----------------------------------------------------------------------

    def decode_batch(
        self, payloads: PayloadsInput, *, headers: HeadersInput = None
    ) -> DecodeResult:
        """Decode payloads to one Arrow batch (input order) plus per-row failures.

        Raises:
            RegistryUnavailableError: The registry is unreachable (never for bad data).
        """
        arr = _as_binary(payloads)
        n = len(arr)
        failures: list[DecodeFailure] = []
        groups, offsets = self._peel(arr, headers, failures)
        writers = {key: self._writer(key) for key in groups}
        parts: list[tuple[np.ndarray, pa.RecordBatch]] = []
        for key, idx in groups.items():
            w = writers[key]
            if w.error is not None:
                failures.extend(DecodeFailure(int(i), w.error.kind, str(w.error)) for i in idx)
                continue
            parts.append(self._decode_group(w, arr, idx, offsets, failures))
        schema = self._output_schema_or_empty()
        batch = _assemble(parts, schema, n)
        failures.sort(key=lambda f: f.index)
        return DecodeResult(batch, failures)

    def _output_schema_or_empty(self) -> pa.Schema:
        if self._target is None:
            return pa.schema([])
        schema = self.arrow_schema
        text = str(schema)
        if text != self._logged_output:
            self._logged_output = text
            logger.info("avro: decode_batch output schema is %s", _OneLine(schema))
        return schema

    def _peel(
        self, arr: pa.BinaryArray, headers: HeadersInput, failures: list[DecodeFailure]
    ) -> tuple[dict[SchemaKey, np.ndarray], np.ndarray]:
        """Row indices per writer schema key, and where each row's body starts.

        Columnar for the Confluent prefix; only rows with a schema-id header and rows
        that fail framing are looked at one by one.
        """
        n = len(arr)
        nulls = arr.is_null().to_numpy(zero_copy_only=False)
        for i in np.flatnonzero(nulls):
            failures.append(
                DecodeFailure(int(i), FailureKind.NULL_PAYLOAD, "avro: null payload (a tombstone)")
            )
        if self._framing is Framing.NONE:
            rows = np.flatnonzero(~nulls)
            return ({_FIXED_KEY: rows} if len(rows) else {}), np.zeros(n, dtype=np.int64)
        ids, ok = peel_confluent_batch(arr)
        ok = ok.copy()
        offsets = np.full(n, 5, dtype=np.int64)
        header_rows = _header_rows(headers, n)
        by_guid: dict[SchemaKey, list[int]] = {}
        for i, hdrs in header_rows.items():
            ok[i] = False  # a schema-id header wins over the payload prefix
            if nulls[i]:
                continue
            try:
                ref = peel(b"", hdrs)
            except FramingError as exc:
                failures.append(DecodeFailure(i, exc.kind, f"avro: {exc}"))
                continue
            by_guid.setdefault(ref.key, []).append(i)
            offsets[i] = ref.body_offset
        for i in np.flatnonzero(~ok & ~nulls):
            if int(i) in header_rows:
                continue
            try:
                peel(arr[int(i)].as_py())
            except FramingError as exc:
                failures.append(DecodeFailure(int(i), exc.kind, f"avro: {exc}"))
        groups: dict[SchemaKey, np.ndarray] = {}
        uniq = np.unique(ids[ok])
        if len(uniq) == 1:
            groups[int(uniq[0])] = np.flatnonzero(ok)
        else:
            for u in uniq.tolist():
                groups[int(u)] = np.flatnonzero(ok & (ids == u))
        for key, rows_list in by_guid.items():
            groups[key] = np.asarray(rows_list, dtype=np.int64)
        return groups, offsets

    def _decode_group(
        self,
        w: _Writer,
        arr: pa.BinaryArray,
        idx: np.ndarray,
        offsets: np.ndarray,
        failures: list[DecodeFailure],
    ) -> tuple[np.ndarray, pa.RecordBatch]:
        plan = self._plan(w)
        schema = self.arrow_schema
        if plan.error is not None:
            failures.extend(
                DecodeFailure(int(i), FailureKind.SCHEMA_MISMATCH, plan.error) for i in idx
            )
            return idx[:0], _empty(schema)
        off = int(offsets[idx[0]])
        taken = arr if len(idx) == len(arr) else arr.take(pa.array(idx, pa.int64()))
        bodies = pc.binary_slice(taken, off, 2**31 - 1) if off else taken
        if plan.fast:
            if w.header is None:
                w.header = _avro_fast.ocf_header(_avro_fast.ocf_schema_json(w.raw, _named_docs(w)))
            decoded = _avro_fast.decode_block(w.header, w.node, bodies)
            if decoded is not None:
                return idx, _project(decoded, plan, schema)
        return self._decode_exact(w, plan, bodies, idx, schema, failures)

    def _decode_exact(
        self,
        w: _Writer,
        plan: _Plan,
        bodies: pa.BinaryArray,
        idx: np.ndarray,
        schema: pa.Schema,
        failures: list[DecodeFailure],
    ) -> tuple[np.ndarray, pa.RecordBatch]:
        with gc_paused():  # a dict per record, freed by refcount: see codecs._gc
            return self._decode_exact_rows(w, plan, bodies, idx, schema, failures)

    def _decode_exact_rows(
        self,
        w: _Writer,
        plan: _Plan,
        bodies: pa.BinaryArray,
        idx: np.ndarray,
        schema: pa.Schema,
        failures: list[DecodeFailure],
    ) -> tuple[np.ndarray, pa.RecordBatch]:
        records: list[dict[str, Any]] = []
        good: list[int] = []
        for pos, body in enumerate(bodies.to_pylist()):
            try:
                records.append(self._read(w, body, plan.reader))
            except AvroDecodeError as exc:
                failures.append(DecodeFailure(int(idx[pos]), exc.kind, str(exc)))
                continue
            good.append(pos)
        source = self._reader.node if self._reader is not None else w.node
        src_children = dict(zip(source.field_names, source.children, strict=False))
        columns = []
        for f, col in zip(
            schema, plan.columns if plan.reader is None else range(len(schema)), strict=False
        ):
            if col is None:
                columns.append(pa.nulls(len(records), f.type))
                continue
            node = src_children.get(f.name)
            values = [r[f.name] for r in records]
            columns.append(node.build(values) if node is not None else pa.array(values, f.type))
            if columns[-1].type != f.type:
                columns[-1] = _avro_fast.cast_exact(columns[-1], f.type)
        batch = pa.RecordBatch.from_arrays(columns, schema=schema)
        return idx[np.asarray(good, dtype=np.int64)], batch


def _named_docs(w: _Writer) -> dict[str, Any]:
    return {k: v for k, v in w.named.items() if isinstance(v, dict)}


def _newer(a: SchemaKey, b: SchemaKey, order: list[SchemaKey]) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a > b
    return order.index(a) > order.index(b)


def _promotable(w: AvroNode, t: AvroNode) -> bool:
    if _same(w, t):
        return True
    wi = w.children[0] if w.kind == "nullable" else w
    ti = t.children[0] if t.kind == "nullable" else t
    return (wi.name, ti.name) in _PROMOTIONS and wi.kind == ti.kind == "prim"


def _as_binary(payloads: PayloadsInput) -> pa.BinaryArray:
    if isinstance(payloads, pa.ChunkedArray):
        payloads = payloads.combine_chunks()
    if not isinstance(payloads, pa.Array):
        payloads = pa.array(list(payloads), pa.binary())
    if not pa.types.is_binary(payloads.type):
        payloads = payloads.cast(pa.binary())
    return payloads


def _header_rows(headers: HeadersInput, n: int) -> dict[int, list[tuple[str, bytes | None]]]:
    """Rows whose headers carry a schema GUID, with their headers."""
    if headers is None:
        return {}
    rows = headers.to_pylist() if isinstance(headers, pa.Array) else list(headers)
    out: dict[int, list[tuple[str, bytes | None]]] = {}
    for i, hdrs in enumerate(rows[:n]):
        if not hdrs:
            continue
        pairs = [(h["key"], h["value"]) if isinstance(h, dict) else tuple(h) for h in hdrs]
        if any(k == "__value_schema_id" for k, _ in pairs):
            out[i] = pairs  # type: ignore[assignment]
    return out


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)


def _project(batch: pa.RecordBatch, plan: _Plan, schema: pa.Schema) -> pa.RecordBatch:
    cols = [
        _avro_fast.cast_exact(batch.column(c), f.type)
        if c is not None
        else pa.nulls(batch.num_rows, f.type)
        for f, c in zip(schema, plan.columns, strict=False)
    ]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _assemble(
    parts: list[tuple[np.ndarray, pa.RecordBatch]], schema: pa.Schema, n: int
) -> pa.RecordBatch:
    parts = [(i, b) for i, b in parts if len(i)]
    if not parts:
        return _empty(schema)
    if len(parts) == 1:
        idx, batch = parts[0]
        if len(idx) < 2 or bool(np.all(np.diff(idx) > 0)):
            return batch
    order = np.concatenate([i for i, _ in parts])
    table = pa.Table.from_batches([b for _, b in parts], schema=schema).combine_chunks()
    perm = np.argsort(order, kind="stable")
    return table.take(pa.array(perm, pa.int64())).to_batches(max_chunksize=n)[0]


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
