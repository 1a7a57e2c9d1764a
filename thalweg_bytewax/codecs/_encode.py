"""What every registry encoder shares: subject naming and schema-id framing.

:class:`RegistryEncoder` is the common part of the Avro, Protobuf and JSON encoders:
their subject and framing options, the schema source, the per-topic bindings (subject
and schema id, resolved once per topic) and the framing of the bodies. The encoder
that passes a binary column through, :class:`~thalweg_bytewax.codecs.BytesEncoder`,
frames nothing and lives in :mod:`._bytes_encode`.

Private to :mod:`thalweg_bytewax.codecs`, which re-exports the public names.
"""

from __future__ import annotations

import struct
import threading
import uuid
from collections.abc import Sequence
from typing import Any, Generic, Literal, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka.schema_registry import Schema

from thalweg_bytewax._choices import check_choice
from thalweg_bytewax.codecs.base import EncodedValues, EncodeError, Framing, parse_framing
from thalweg_bytewax.codecs.framing import (
    KEY_SCHEMA_ID_HEADER,
    MAGIC_GUID,
    MAGIC_ID,
    VALUE_SCHEMA_ID_HEADER,
    encode_message_indexes,
)
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.registry import (
    RegistrySchemaSource,
    ResolvedSchema,
    SchemaSource,
    UnknownSchemaError,
    schema_source,
)

__all__ = [
    "RegistryEncoder",
    "SchemaIdIn",
    "SubjectStrategy",
    "check_schema_id_in",
    "check_subject_strategy",
    "frame_bodies",
    "registered_schema",
    "schema_id_of_type",
    "subject_name",
]

SubjectStrategy = Literal["topic", "record", "topic_record"]
"""Confluent subject naming: ``<topic>-value``, ``<record>``, ``<topic>-<record>``."""
SchemaIdIn = Literal["payload", "header"]
"""Where the schema reference travels: the payload prefix (magic 0 + id) or a header."""
BoundT = TypeVar("BoundT")
_STRATEGIES: tuple[SubjectStrategy, ...] = ("topic", "record", "topic_record")
_ID_IN: tuple[SchemaIdIn, ...] = ("payload", "header")


def check_subject_strategy(value: object, encoder: str) -> SubjectStrategy:
    """``value`` if it is a subject strategy, else a ``ConfigError`` naming the choices."""
    check_choice(value, _STRATEGIES, where=f"{encoder} encoder", argument="subject_strategy")
    return value  # type: ignore[return-value]


def check_schema_id_in(value: object, encoder: str) -> SchemaIdIn:
    """``value`` if it is ``payload`` or ``header``, else a ``ConfigError``."""
    check_choice(value, _ID_IN, where=f"{encoder} encoder", argument="schema_id_in")
    return value  # type: ignore[return-value]


def subject_name(
    strategy: SubjectStrategy, topic: str, record_name: str | None, *, is_key: bool = False
) -> str:
    """The registry subject for ``topic`` under ``strategy`` (Confluent's naming).

    Args:
        strategy: ``topic`` (``<topic>-value``), ``record`` (the record's full name) or
            ``topic_record`` (``<topic>-<full name>``).
        topic: The topic written to.
        record_name: The schema's fully qualified record / message name.
        is_key: Name the key subject (``<topic>-key``) instead of the value subject.
    """
    if strategy == "topic":
        return f"{topic}-{'key' if is_key else 'value'}"
    if record_name is None:  # pragma: no cover - encoders always know their record name
        msg = f"subject strategy `{strategy}`: expected a record name; got None"
        raise ConfigError(msg)
    return record_name if strategy == "record" else f"{topic}-{record_name}"


def registered_schema(
    source: SchemaSource,
    subject: str,
    schema: Schema | None,
    *,
    auto_register: bool,
    encoder: str,
    fmt: str | None = None,
) -> ResolvedSchema:
    """The registry's id / GUID for ``schema`` under ``subject`` (cached by the source).

    ``schema`` given: registered with ``auto_register``, else looked up (it must already
    be registered under ``subject``). ``schema`` omitted: the subject's latest version.

    Raises:
        UnknownSchemaError: The subject lacks the schema (or has no version at all).
        ConfigError: Registering or looking up a schema text in a schema directory.
        RegistryUnavailableError: The registry stayed unreachable.
    """
    try:
        if schema is None:
            return source.get_version(subject, "latest", fmt=fmt)
        if not isinstance(source, RegistrySchemaSource):
            msg = (
                f"{encoder} encoder: `schema=` with {source!r} expected a schema registry "
                f"to assign the schema id; got a schema directory; pass a registry URL, or "
                f"omit `schema=` to use the subject's latest version"
            )
            raise ConfigError(msg)
        return source.register(subject, schema, lookup_only=not auto_register)
    except UnknownSchemaError as exc:
        hint = (
            "register it first or pass `auto_register=True`"
            if schema is not None
            else "register a schema under it or pass `schema=`"
        )
        what = "the schema" if schema is not None else "a version"
        msg = (
            f"{encoder} encoder: subject `{subject}` in {source.description} has no {what} "
            f"to encode with; {hint}"
        )
        raise UnknownSchemaError(msg) from exc


def schema_id_of_type(
    resolved: ResolvedSchema, subject: str, *, schema_type: str, encoder: str
) -> int:
    """The schema id of ``resolved``, a schema of ``subject`` this encoder can write with.

    Args:
        resolved: What the registry answered for ``subject``.
        subject: The subject, for the message.
        schema_type: The registry's name of the encoder's format (``AVRO``, ...).
        encoder: The encoder's name in messages.

    Raises:
        SchemaError: When the subject holds a schema of another format (or one without
            an id), naming both formats.
    """
    if resolved.schema_type != schema_type or resolved.schema_id is None:
        article = "an" if schema_type[:1] in "AEIOU" else "a"
        msg = (
            f"{encoder} encoder: subject `{subject}` expected {article} {schema_type} schema; "
            f"got {resolved.schema_type}; use the matching encoder or another subject"
        )
        raise SchemaError(msg)
    return resolved.schema_id


def _concat_prefix(prefix: bytes, bodies: pa.BinaryArray) -> pa.BinaryArray:
    """``prefix + body`` for every row in one Arrow kernel (nulls stay null)."""
    if not prefix:
        return bodies
    head = pa.scalar(prefix, pa.binary())
    joined = pc.binary_join_element_wise(head, bodies, pa.scalar(b"", pa.binary()))
    return joined


def frame_bodies(
    bodies: pa.BinaryArray,
    *,
    schema_id: int,
    guid: str | None,
    schema_id_in: SchemaIdIn,
    message_indexes: Sequence[int] | None = None,
    is_key: bool = False,
    encoder: str = "encoder",
) -> EncodedValues:
    """Frame encoded bodies the way :mod:`thalweg_bytewax.codecs.framing` peels them.

    ``payload``: magic byte 0 + 4-byte big-endian id (+ Protobuf message indexes) in
    front of every body. ``header``: the bare body, and a ``__value_schema_id`` (or
    ``__key_schema_id``) header holding magic byte 1 + the 16-byte schema GUID (+ the
    message indexes), as confluent-kafka >= 2.16 writes it.

    Raises:
        EncodeError: Header framing without a GUID (the registry did not return one).
    """
    indexes = b"" if message_indexes is None else encode_message_indexes(message_indexes)
    if schema_id_in == "payload":
        prefix = struct.pack(">bI", MAGIC_ID, schema_id) + indexes
        return EncodedValues(_concat_prefix(prefix, bodies))
    if guid is None:
        msg = (
            f"{encoder} encoder: `schema_id_in='header'` expected the registry to return "
            f"a schema GUID for id {schema_id}; got none; use `schema_id_in='payload'` "
            f"with this registry"
        )
        raise EncodeError(msg)
    value = bytes([MAGIC_GUID]) + uuid.UUID(guid).bytes + indexes
    name = KEY_SCHEMA_ID_HEADER if is_key else VALUE_SCHEMA_ID_HEADER
    header = [(name, value)]
    return EncodedValues(bodies, [list(header) for _ in range(len(bodies))])


class RegistryEncoder(Generic[BoundT]):
    """The part every schema encoder shares: options, schema source, bindings, framing.

    A subclass calls ``__init__`` first, :meth:`_open_registry` when its framing is
    ``confluent``, and implements :meth:`_resolve` (a topic's subject and schema id,
    looked up once per topic through :meth:`_bound_for`) and :meth:`_record_name`.

    Args:
        encoder: The encoder's name in messages (``avro``, ``protobuf``, ``json``).
        subject: A fixed subject name; overrides ``subject_strategy``.
        subject_strategy: Confluent subject naming.
        schema_id_in: Where the schema reference travels.
        auto_register: Register the schema under the subject when it is not there yet.
        framing: ``confluent`` or ``none``.
        metadata_prefix: Top-level columns under this prefix are not written.
        is_key: Encode Kafka keys (``<topic>-key`` subjects, ``__key_schema_id``).
    """

    def __init__(
        self,
        encoder: str,
        *,
        subject: str | None,
        subject_strategy: object,
        schema_id_in: object,
        auto_register: bool,
        framing: Framing | str,
        metadata_prefix: str,
        is_key: bool,
    ) -> None:
        self._encoder = encoder
        self._strategy = check_subject_strategy(subject_strategy, encoder)
        self._id_in = check_schema_id_in(schema_id_in, encoder)
        self._framing = parse_framing(framing, encoder)
        self._subject, self._auto, self._is_key = subject, auto_register, is_key
        self._prefix = metadata_prefix
        self._source: SchemaSource | None = None
        self._bound: dict[str, BoundT] = {}
        self._lock = threading.Lock()

    def _require_record_name(self, named: bool, subject: str | None, needs: str) -> None:
        """Refuse a subject strategy that names subjects by record without a way to name it.

        Args:
            named: Whether the encoder was given what names its record (a schema, a
                message type).
            subject: The fixed subject, if any (then no record name is needed).
            needs: What to pass, for the message (``"`schema=`"``, ...).

        Raises:
            ConfigError: With ``subject_strategy`` other than ``"topic"``, no ``subject``
                and nothing that names the record.
        """
        if not named and subject is None and self._strategy != "topic":
            msg = (
                f"{self._encoder} encoder: subject_strategy {self._strategy!r} expected "
                f"{needs} (the record name picks the subject); got none; pass it or `subject=`"
            )
            raise ConfigError(msg)

    def _open_registry(self, registry: Any) -> SchemaSource:
        """The schema source of ``registry``; required with ``confluent`` framing.

        Raises:
            ConfigError: When ``registry`` is None.
        """
        if registry is None:
            msg = (
                f"{self._encoder} encoder: framing 'confluent' needs registry=; pass a URL "
                f"or source"
            )
            raise ConfigError(msg)
        self._source = schema_source(registry)
        return self._source

    @property
    def name(self) -> str:
        """The encoder's name: ``avro``, ``protobuf`` or ``json``."""
        return self._encoder

    def subject_for(self, topic: str) -> str:
        """The registry subject the encoder uses for ``topic``."""
        if self._subject is not None:
            return self._subject
        return subject_name(self._strategy, topic, self._record_name(), is_key=self._is_key)

    def _record_name(self) -> str | None:
        """The schema's fully qualified record name, when known (for the subject)."""
        return None

    def _registry_description(self) -> str:
        """How ``__repr__`` names the schema source (never a credential)."""
        return self._source.description if self._source is not None else "none"

    def _resolve(self, topic: str) -> BoundT:
        """Look up (or register) ``topic``'s subject and schema: once per topic."""
        raise NotImplementedError

    def _bound_for(self, topic: str) -> BoundT:
        """``topic``'s binding, resolved on first use and cached (thread-safe)."""
        with self._lock:
            hit = self._bound.get(topic)
        if hit is not None:
            return hit
        bound = self._resolve(topic)
        with self._lock:
            self._bound[topic] = bound
        return bound

    def _without_metadata(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` without its top-level metadata columns (they are never written)."""
        keep = [n for n in batch.schema.names if not n.startswith(self._prefix)]
        return batch.select(keep) if len(keep) != batch.num_columns else batch

    def _framed(
        self,
        bodies: pa.BinaryArray,
        *,
        schema_id: int,
        guid: str | None,
        message_indexes: Sequence[int] | None = None,
    ) -> EncodedValues:
        """``bodies`` framed with this encoder's ``schema_id_in`` and ``is_key``."""
        return frame_bodies(
            bodies,
            schema_id=schema_id,
            guid=guid,
            schema_id_in=self._id_in,
            message_indexes=message_indexes,
            is_key=self._is_key,
            encoder=self._encoder,
        )
