"""Avro encoder: Arrow batches to Confluent-framed (or bare) Avro payloads.

The bodies are written column by column (:mod:`thalweg_bytewax.codecs._avro_write`);
this module binds a topic to its subject and schema id and frames the bodies.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa
from confluent_kafka.schema_registry import Schema

from thalweg_bytewax.codecs._avro_write import write_bodies
from thalweg_bytewax.codecs._encode import (
    RegistryEncoder,
    SchemaIdIn,
    SubjectStrategy,
    registered_schema,
    schema_id_of_type,
)
from thalweg_bytewax.codecs.base import EncodedValues, Framing
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX

__all__ = ["AvroEncoder"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Bound:
    parsed: Mapping[str, Any]
    schema_id: int
    guid: str | None


def _parse(text: str, where: str) -> Mapping[str, Any]:
    try:
        doc = json.loads(text)
        parsed = fastavro.parse_schema(doc, expand=True)
    except Exception as exc:  # fastavro and json raise several types for bad schemas
        msg = f"avro encoder: cannot parse {where} ({type(exc).__name__}: {exc}); fix the schema"
        raise SchemaError(msg) from exc
    if not isinstance(parsed, Mapping) or parsed.get("type") not in ("record", "error"):
        msg = f"avro encoder: {where} expected a record schema; got {str(doc)[:60]!r}"
        raise SchemaError(msg)
    return parsed


class AvroEncoder(RegistryEncoder["_Bound"]):
    r"""Encode Arrow batches to Avro payloads, one per row, without a per-row loop.

    Every column is written at once (numpy and Arrow kernels); the result reads back
    through :class:`~thalweg_bytewax.codecs.AvroCodec` and confluent-kafka's
    ``AvroDeserializer`` to the same values. Columns are matched to the record's fields
    by name; a missing field takes its schema default, a column the schema lacks, a
    null in a non-nullable field, or a value out of range raises ``EncodeError``.

    Args:
        registry: A ``SchemaSource``, ``SchemaRegistryClient``, registry URL
            (``http(s)://``, ``mock://``) or schema directory. Not needed with
            ``framing="none"``.
        schema: The writer schema (Avro JSON text or dict). With a registry it is
            looked up under the subject (or registered, ``auto_register=True``);
            omitted, the subject's latest version is used.
        subject: A fixed subject name; overrides ``subject_strategy``.
        subject_strategy: ``"topic"`` (``<topic>-value``), ``"record"`` (the record's
            full name) or ``"topic_record"`` (``<topic>-<record>``), as Confluent names them.
        schema_id_in: ``"payload"`` (magic byte 0 + 4-byte id in front of the body) or
            ``"header"`` (bare body, schema GUID in the ``__value_schema_id`` header).
        auto_register: Register ``schema`` under the subject when it is not there yet.
        framing: ``"confluent"`` (default) or ``"none"`` (bare bodies with ``schema``).
        metadata_prefix: Top-level columns under this prefix (the ``_twg_`` metadata
            columns) are not written; any other column the schema lacks is an error.
        is_key: Encode Kafka keys: ``<topic>-key`` subjects and ``__key_schema_id``.

    Raises:
        ConfigError: On an inconsistent configuration.
        SchemaError: When ``schema`` cannot be parsed or is not a record.

    Example:
        >>> import pyarrow as pa
        >>> enc = AvroEncoder(framing="none", schema={"type": "record", "name": "R",
        ...     "fields": [{"name": "id", "type": "long"}]})
        >>> enc.encode_batch(pa.record_batch({"id": [1, -1]}), topic="t").values.to_pylist()
        [b'\x02', b'\x01']
    """

    def __init__(
        self,
        registry: Any = None,
        *,
        schema: str | Mapping[str, Any] | None = None,
        subject: str | None = None,
        subject_strategy: SubjectStrategy = "topic",
        schema_id_in: SchemaIdIn = "payload",
        auto_register: bool = False,
        framing: Framing | str = Framing.CONFLUENT,
        metadata_prefix: str = DEFAULT_PREFIX,
        is_key: bool = False,
    ) -> None:
        super().__init__(
            "avro",
            subject=subject,
            subject_strategy=subject_strategy,
            schema_id_in=schema_id_in,
            auto_register=auto_register,
            framing=framing,
            metadata_prefix=metadata_prefix,
            is_key=is_key,
        )
        self._text = schema if isinstance(schema, str) or schema is None else json.dumps(schema)
        self._parsed = None if self._text is None else _parse(self._text, "`schema`")
        if self._framing is Framing.NONE:
            if self._parsed is None:
                msg = "avro encoder: framing 'none' needs schema= (the writer schema of the bodies)"
                raise ConfigError(msg)
        else:
            self._open_registry(registry)
            self._require_record_name(self._parsed is not None, subject, "`schema=`")

    def __repr__(self) -> str:
        where = self._registry_description()
        return f"AvroEncoder(registry={where!r}, schema_id_in={self._id_in!r})"

    def _record_name(self) -> str | None:
        return None if self._parsed is None else str(self._parsed["name"])

    def _resolve(self, topic: str) -> _Bound:
        assert self._source is not None
        subject = self.subject_for(topic)
        schema = None if self._text is None else Schema(self._text, "AVRO")
        resolved = registered_schema(
            self._source, subject, schema, auto_register=self._auto, encoder="avro"
        )
        schema_id = schema_id_of_type(resolved, subject, schema_type="AVRO", encoder="avro")
        parsed = self._parsed or _parse(resolved.schema_str, f"subject `{subject}`")
        bound = _Bound(parsed, schema_id, resolved.guid)
        logger.info(
            "avro encoder: topic %s writes with subject %s schema id %s",
            topic,
            subject,
            bound.schema_id,
        )
        return bound

    def encode_batch(self, batch: pa.RecordBatch, *, topic: str) -> EncodedValues:
        """One framed Avro payload per row of ``batch``, for ``topic``'s subject.

        Raises:
            EncodeError: When a row does not fit the schema (names column and row).
            UnknownSchemaError: The subject lacks the schema (and ``auto_register`` is off).
            RegistryUnavailableError: The registry stayed unreachable.
        """
        batch = self._without_metadata(batch)
        if self._framing is Framing.NONE:
            assert self._parsed is not None
            return EncodedValues(write_bodies(self._parsed, batch))
        bound = self._bound_for(topic)
        bodies = write_bodies(bound.parsed, batch)
        return self._framed(bodies, schema_id=bound.schema_id, guid=bound.guid)
