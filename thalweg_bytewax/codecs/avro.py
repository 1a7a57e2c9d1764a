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

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from thalweg_bytewax._choices import check_choice
from thalweg_bytewax._deps import require
from thalweg_bytewax.codecs._avro_decode import (
    _assemble,
    _peel,
    _walk_refused,
)
from thalweg_bytewax.codecs._avro_groups import decode_framed, decode_group
from thalweg_bytewax.codecs._avro_headers import header_rows as guid_header_rows
from thalweg_bytewax.codecs._avro_resolve import (
    _FIXED_KEY,
    AvroDecodeError,
    _load_json,
    _OneLine,
    _read,
    _Writer,
)
from thalweg_bytewax.codecs._avro_writers import WriterSchemas
from thalweg_bytewax.codecs._decode_inputs import DecodeInputs
from thalweg_bytewax.codecs._payloads import as_binary
from thalweg_bytewax.codecs.base import (
    DecodeFailure,
    DecodeResult,
    Framing,
    HeadersInput,
    PayloadsInput,
)
from thalweg_bytewax.codecs.framing import peel
from thalweg_bytewax.errors import ConfigError, FailureKind, SchemaError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX
from thalweg_bytewax.registry import SchemaKey, SchemaSource, schema_source

__all__ = ["AvroCodec", "AvroDecodeError", "AvroEngine"]

AvroEngine = Literal["auto", "polars", "fastavro"]
"""The columnar reader of :class:`AvroCodec`: ``auto``, ``polars`` or ``fastavro``."""
_ENGINES: tuple[AvroEngine, ...] = ("auto", "polars", "fastavro")

logger = logging.getLogger(__name__)


class AvroCodec(DecodeInputs):
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
        engine: The columnar reader of ``decode_batch``. ``"auto"`` (default): polars
            for every writer schema it reads exactly, fastavro for the rest, and
            fastavro alone when polars is not installed. ``"polars"``: the same, but
            polars is required. ``"fastavro"``: fastavro for every record (the exact
            path, slower: see docs/benchmarks.md; the reference polars is tested against).
            All engines decode every payload alike; ``decode_value`` always uses
            fastavro.

    Raises:
        ConfigError: On an inconsistent configuration or an unknown ``engine``.
        MissingDependencyError: With ``engine="polars"`` when polars is not installed.
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
        engine: AvroEngine = "auto",
    ) -> None:
        check_choice(engine, _ENGINES, where="avro codec", argument="engine")
        if engine == "polars":
            require("polars", extra="fast")
        self._framing = self._framing_of(framing)
        self._logged_output: str | None = None
        source: SchemaSource | None = None
        if self._framing is Framing.CONFLUENT:
            if registry is None:
                msg = "avro codec: framing 'confluent' needs registry=; pass a URL or source"
                raise ConfigError(msg)
            source = schema_source(registry)
        elif schema is None and reader_schema is None:
            msg = "avro codec: framing 'none' needs schema= (the writer schema of the bodies)"
            raise ConfigError(msg)
        self._schemas = WriterSchemas(
            source, metadata_prefix=metadata_prefix, fast=engine != "fastavro"
        )
        if reader_schema is not None:
            reader = self._schemas.compile("reader", "reader schema", _load_json(reader_schema), {})
            if reader.error is not None:
                raise SchemaError(str(reader.error))
            self._schemas.reader = reader
        if self._framing is Framing.NONE:
            body_schema = schema if schema is not None else reader_schema
            assert body_schema is not None  # framing 'none' without either is rejected above
            doc = _load_json(body_schema)
            w = self._schemas.compile(_FIXED_KEY, "schema", doc, {})
            if w.error is not None and w.error.kind is not FailureKind.RESERVED_FIELD:
                raise SchemaError(str(w.error))
            self._schemas.writers[_FIXED_KEY] = w
            self._schemas.see(w)

    # -- schemas ------------------------------------------------------------------

    @property
    def name(self) -> str:
        """``avro``."""
        return "avro"

    def __repr__(self) -> str:
        source = self._schemas.source
        src = source.description if source else None
        return f"AvroCodec(registry={src!r}, framing={self._framing.value!r})"

    @property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema ``decode_batch`` produces now.

        The reader schema's when given, else the newest writer schema's seen so far.

        Raises:
            SchemaError: When there is no reader schema and no writer schema seen yet.
        """
        return self._schemas.arrow_schema()

    def arrow_schema_for(self, schema_id: SchemaKey) -> pa.Schema:
        """The Arrow schema one writer schema decodes to on its own (``describe-schema``).

        Raises:
            SchemaError: When the schema is unknown or cannot be mapped.
        """
        w = self._schemas.get(schema_id)
        if w.error is not None and w.error.kind is not FailureKind.RESERVED_FIELD:
            raise SchemaError(str(w.error))
        return pa.schema(
            [c.arrow_field(n) for n, c in zip(w.node.field_names, w.node.children, strict=False)]
        )

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
            ConfigError: ``payload`` is not bytes-like or ``None``, or ``headers`` is
                not a sequence of ``(str, bytes | None)`` pairs.
        """
        self._check_value_args(payload, headers)
        if payload is None:
            msg = "avro: null payload (a tombstone) has no record to decode"
            raise AvroDecodeError(msg, FailureKind.NULL_PAYLOAD)
        if self._framing is Framing.NONE:
            w, offset = self._schemas.writers[_FIXED_KEY], 0
        else:
            ref = peel(payload, headers)
            w, offset = self._schemas.get(ref.key), ref.body_offset
        if w.error is not None:
            raise w.error
        reader = self._schemas.reader
        target = reader or w
        body = memoryview(payload)[offset:]
        refused = _walk_refused(w, pa.array([bytes(body)], pa.binary()))
        if refused:  # fastavro would read it wrong, or for ever
            raise AvroDecodeError(refused[0], FailureKind.MALFORMED)
        rec = _read(w, body, reader.parsed if reader else None)
        record: dict[str, Any] = target.node.normalize(rec)  # a record schema: a dict
        return record

    # -- columnar -----------------------------------------------------------------------

    def decode_batch(
        self, payloads: PayloadsInput, *, headers: HeadersInput = None
    ) -> DecodeResult:
        """Decode payloads to one Arrow batch (input order) plus per-row failures.

        Raises:
            RegistryUnavailableError: The registry is unreachable (never for bad data).
            ConfigError: ``payloads`` is not a binary Arrow array or a sequence of bytes,
                or ``headers`` does not have one row per payload.
        """
        payloads = self._checked_batch_args(payloads, headers)
        arr = as_binary(payloads)
        n = len(arr)
        header_rows = guid_header_rows(headers, n) if self._framing is Framing.CONFLUENT else {}
        usual = self._decode_usual(arr, header_rows)
        if usual is not None:
            return DecodeResult(usual, [])
        failures: list[DecodeFailure] = []
        groups, offsets = _peel(self._framing, arr, header_rows, failures)
        writers = {key: self._schemas.get(key) for key in groups}
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

    def _decode_usual(
        self, arr: pa.BinaryArray, header_rows: dict[int, list[tuple[str, bytes | None]]]
    ) -> pa.RecordBatch | None:
        """The usual batch in one native pass, or ``None`` for the general path.

        The usual batch: Confluent-framed, every row for the first row's writer schema,
        no schema-id header, no null, every body good. The frames are checked, the
        bodies walked and joined for polars in one pass (no columnar peel, no sliced
        copy); any other batch, or one that pass does not prove, is peeled and decoded
        group by group, which names each failing row and its reason.
        """
        if self._framing is not Framing.CONFLUENT or header_rows or arr.null_count:
            return None
        schema_id = _first_schema_id(arr)
        if schema_id is None:
            return None
        w = self._schemas.get(schema_id)
        if w.error is not None:  # else the writer was seen: the output schema is known
            return None
        decoded = decode_framed(w, self._schemas.plan(w), self.arrow_schema, arr, schema_id)
        if decoded is None:
            return None
        self._output_schema_or_empty()  # logs a new output schema, as the general path
        return decoded

    def _output_schema_or_empty(self) -> pa.Schema:
        if self._schemas.target is None:
            return pa.schema([])
        schema = self.arrow_schema
        text = str(schema)
        if text != self._logged_output:
            self._logged_output = text
            logger.info("avro: decode_batch output schema is %s", _OneLine(schema))
        return schema

    def _decode_group(
        self,
        w: _Writer,
        arr: pa.BinaryArray,
        idx: np.ndarray,
        offsets: np.ndarray,
        failures: list[DecodeFailure],
    ) -> tuple[np.ndarray, pa.RecordBatch]:
        plan = self._schemas.plan(w)
        schema = self.arrow_schema
        return decode_group(self._schemas.reader, w, plan, schema, arr, idx, offsets, failures)


def _first_schema_id(arr: pa.BinaryArray) -> int | None:
    """The schema id in the Confluent frame of the first row, or ``None`` when unframed."""
    if not len(arr) or arr.null_count:
        return None
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=2, offset=4 * arr.offset)
    data = arr.buffers()[2]
    start, end = int(offsets[0]), int(offsets[1])
    if data is None or end - start < 5:
        return None
    head = memoryview(data)[start : start + 5]
    if head[0] != 0:
        return None
    return int.from_bytes(head[1:5], "big")
