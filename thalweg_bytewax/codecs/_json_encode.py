"""JSON encoder: Arrow batches to one JSON object per row, exact, without a row loop.

Values with no exact JSON number form are written as text the JSON codec reads back to
the same value: decimals as strings (``"881.37"``), instants as RFC 3339 UTC
(``"2024-05-01T10:00:00.123456Z"``), timestamps without a zone without an offset,
dates as ``"2024-05-01"``, times as ``"10:00:00.123"``, bytes as base64. NaN and
infinities have no JSON form: ``nan="error"`` (default) raises ``EncodeError`` naming
the column and row, ``nan="null"`` writes ``null``. The prepared batch (columns rewritten by
:mod:`._json_prepare`) is serialised by DuckDB's ``to_json`` in one columnar pass.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka.schema_registry import Schema

from thalweg_bytewax._choices import check_choice
from thalweg_bytewax.codecs._encode import (
    RegistryEncoder,
    SchemaIdIn,
    SubjectStrategy,
    registered_schema,
    schema_id_of_type,
)
from thalweg_bytewax.codecs._json_prepare import ColumnPrep, NanPolicy, first_index, row_error
from thalweg_bytewax.codecs.base import EncodedValues, EncodeError, Framing
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records import DEFAULT_PREFIX
from thalweg_bytewax.sql.engine import shared_cursor

__all__ = ["JsonEncoder", "NanPolicy"]

_NAN: tuple[NanPolicy, ...] = ("error", "null")
_Bound = tuple[int, str | None, pa.Schema | None]  # schema id, GUID, the decoder's shape

logger = logging.getLogger(__name__)


class JsonEncoder(RegistryEncoder[_Bound]):
    r"""Encode Arrow batches to JSON objects, one per row, exactly and columnar.

    Every column becomes a key (top-level columns under the metadata prefix are left
    out: they are not payload). With ``schema`` (a JSON Schema, or a ``pyarrow.Schema``)
    the batch is first cast to the Arrow schema the :class:`~thalweg_bytewax.codecs.JsonCodec`
    decodes that schema to, so a value the decoder would refuse (a null in a required
    field, a string for an integer) raises ``EncodeError`` here instead.

    Args:
        registry: A registry (``SchemaSource``, client or URL) for Confluent framing.
        schema: A JSON Schema (dict or text) or a ``pyarrow.Schema``. With a registry
            it is registered (``auto_register``) or looked up under the subject;
            omitted, the subject's latest version is used.
        subject: A fixed subject name; overrides ``subject_strategy``.
        subject_strategy: ``"topic"``, ``"record"`` or ``"topic_record"`` (the record
            name is the schema's ``title``).
        schema_id_in: ``"payload"`` (magic 0 + id prefix) or ``"header"`` (GUID header).
        auto_register: Register ``schema`` under the subject when it is not there.
        framing: ``"none"`` (default: bare JSON) or ``"confluent"`` (needs ``registry``).
        nan: ``"error"`` (default) or ``"null"`` for NaN and infinities.
        omit_nulls: Leave out object keys whose value is null (a JSON Schema's optional
            property may be absent, but null only if its type admits it). Default: on
            with a JSON Schema or a registry, off otherwise. Null items of arrays stay;
            a null value in a map is left out too.
        metadata_prefix: Top-level columns under this prefix are not written.
        is_key: Encode Kafka keys (``<topic>-key`` subjects, ``__key_schema_id``).

    Raises:
        ConfigError: On an inconsistent configuration.

    Example:
        >>> import pyarrow as pa
        >>> from decimal import Decimal
        >>> batch = pa.record_batch({"id": [1], "amount": pa.array([Decimal("2.50")])})
        >>> JsonEncoder().encode_batch(batch, topic="t").values.to_pylist()
        [b'{"id":1,"amount":"2.50"}']
    """

    def __init__(
        self,
        registry: Any = None,
        *,
        schema: Mapping[str, Any] | pa.Schema | str | None = None,
        subject: str | None = None,
        subject_strategy: SubjectStrategy = "topic",
        schema_id_in: SchemaIdIn = "payload",
        auto_register: bool = False,
        framing: Framing | str = Framing.NONE,
        nan: NanPolicy = "error",
        omit_nulls: bool | None = None,
        metadata_prefix: str = DEFAULT_PREFIX,
        is_key: bool = False,
    ) -> None:
        check_choice(nan, _NAN, where="json encoder", argument="nan")
        self._prep = ColumnPrep(nan)
        super().__init__(
            "json",
            subject=subject,
            subject_strategy=subject_strategy,
            schema_id_in=schema_id_in,
            auto_register=auto_register,
            framing=framing,
            metadata_prefix=metadata_prefix,
            is_key=is_key,
        )
        self._doc: dict[str, Any] | None = None
        if isinstance(schema, str):
            try:
                self._doc = json.loads(schema)
            except json.JSONDecodeError as exc:
                msg = f"json encoder: `schema` expected JSON Schema text; got invalid JSON ({exc})"
                raise ConfigError(msg) from exc
        elif isinstance(schema, Mapping):
            self._doc = dict(schema)
        self._target = self._arrow(schema) if schema is not None else None
        self._omit = (
            omit_nulls
            if omit_nulls is not None
            else (self._doc is not None or self._framing is Framing.CONFLUENT)
        )
        if self._framing is Framing.CONFLUENT:
            self._open_registry(registry)
            if self._doc is None and schema is not None:
                msg = (
                    "json encoder: framing 'confluent' expected a JSON Schema to register; "
                    "got a pyarrow.Schema; pass the JSON Schema (dict or text)"
                )
                raise ConfigError(msg)
            self._require_record_name(self._doc is not None, subject, "`schema=`")

    @staticmethod
    def _arrow(schema: Any) -> pa.Schema:
        from thalweg_bytewax.codecs.json import JsonCodec  # noqa: PLC0415 - the decoder's mapping, loaded once

        doc = json.loads(schema) if isinstance(schema, str) else schema
        return JsonCodec(schema=doc).arrow_schema

    def __repr__(self) -> str:
        where = self._registry_description()
        return f"JsonEncoder(registry={where!r}, framing={self._framing.value!r})"

    def _record_name(self) -> str | None:
        title = None if self._doc is None else str(self._doc.get("title", "")) or None
        if title is None and self._strategy != "topic":
            msg = (
                f"json encoder: subject_strategy {self._strategy!r} expected a `title` in "
                f"the JSON Schema; got none; add one or pass `subject=`"
            )
            raise ConfigError(msg)
        return title

    def _resolve(self, topic: str) -> _Bound:
        assert self._source is not None
        subject = self.subject_for(topic)
        text = None if self._doc is None else json.dumps(self._doc)
        resolved = registered_schema(
            self._source,
            subject,
            None if text is None else Schema(text, "JSON"),
            auto_register=self._auto,
            encoder="json",
        )
        schema_id = schema_id_of_type(resolved, subject, schema_type="JSON", encoder="json")
        target = self._target or self._arrow(resolved.schema_str)
        bound = (schema_id, resolved.guid, target)
        logger.info(
            "json encoder: topic %s writes with subject %s schema id %s", topic, subject, bound[0]
        )
        return bound

    def _conform(self, batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
        """``batch`` cast to ``target`` (the decoder's shape), failing on the first misfit."""
        rows = np.arange(batch.num_rows)
        cols, fields = [], []
        for field in target:
            idx = batch.schema.get_field_index(field.name)
            if idx < 0:
                if field.nullable:
                    continue
                msg = (
                    f"json encoder: expected column `{field.name}` (required by the schema); "
                    f"got columns {batch.schema.names}; add the column"
                )
                raise EncodeError(msg, column=field.name)
            col = batch.column(idx)
            if not field.nullable and col.null_count:
                raise row_error(
                    field.name,
                    first_index(col.is_null()),
                    "expected a value (required); got null",
                    "fill it or make the field optional",
                )
            if col.type != field.type:
                try:
                    col = col.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                    i = next(
                        (i for i in rows if not _casts(col.slice(int(i), 1), field.type)), None
                    )
                    if i is None:
                        msg = (
                            f"json encoder: column `{field.name}`: expected `{field.type}`; "
                            f"got `{col.type}` ({exc}); cast the column first"
                        )
                        raise EncodeError(msg, column=field.name) from exc
                    raise row_error(
                        field.name,
                        int(i),
                        f"expected a value of `{field.type}`; got {col[int(i)].as_py()!r}",
                        "fix the value or the schema",
                    ) from exc
            cols.append(col)
            fields.append(pa.field(field.name, col.type))
        known = set(target.names)
        for name, col in zip(batch.schema.names, batch.columns, strict=True):
            if name not in known:
                cols.append(col)
                fields.append(pa.field(name, col.type))
        return pa.RecordBatch.from_arrays(cols, schema=pa.schema(fields))

    def _bodies(self, batch: pa.RecordBatch, target: pa.Schema | None) -> pa.BinaryArray:
        batch = self._without_metadata(batch)
        if target is not None:
            batch = self._conform(batch, target)
        rows = np.arange(batch.num_rows, dtype=np.int64)
        cols = [
            self._prep.column(c, n, rows)
            for n, c in zip(batch.schema.names, batch.columns, strict=True)
        ]
        table = pa.table(cols, names=batch.schema.names)
        if not table.num_columns:
            return pa.array([b"{}"] * batch.num_rows, pa.binary())
        rel = shared_cursor().from_arrow(table).set_alias("t")
        # RFC 7396 merge patch onto {} drops every null-valued key, at every depth.
        expr = "json_merge_patch('{}', to_json(t))" if self._omit else "to_json(t)"
        out = rel.project(f"{expr}::BLOB AS v").to_arrow_table().column(0)
        return out.combine_chunks() if out.num_chunks != 1 else out.chunk(0)

    def encode_batch(self, batch: pa.RecordBatch, *, topic: str) -> EncodedValues:
        """One JSON object per row of ``batch`` (framed for ``topic``'s subject).

        Raises:
            EncodeError: When a value has no JSON form or does not fit the schema.
            UnknownSchemaError: The subject lacks the schema (and ``auto_register`` is off).
            RegistryUnavailableError: The registry stayed unreachable.
        """
        if self._framing is Framing.NONE:
            return EncodedValues(self._bodies(batch, self._target))
        schema_id, guid, target = self._bound_for(topic)
        return self._framed(self._bodies(batch, target), schema_id=schema_id, guid=guid)


def _casts(arr: pa.Array, target: pa.DataType) -> bool:
    try:
        arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False
    return True
