"""What every encoder shares: subject naming, schema-id framing, ``BytesEncoder``.

Private to :mod:`thalweg_bytewax.codecs`, which re-exports the public names.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka.schema_registry import Schema

from thalweg_bytewax._choices import check_choice
from thalweg_bytewax.codecs.base import EncodedValues, EncodeError
from thalweg_bytewax.codecs.framing import (
    KEY_SCHEMA_ID_HEADER,
    MAGIC_GUID,
    MAGIC_ID,
    VALUE_SCHEMA_ID_HEADER,
    encode_message_indexes,
)
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.metadata import DEFAULT_PREFIX
from thalweg_bytewax.registry import (
    RegistrySchemaSource,
    ResolvedSchema,
    SchemaSource,
    UnknownSchemaError,
)

RAW_VALUE = f"{DEFAULT_PREFIX}source_value"
"""The raw lane's payload column, what :class:`BytesEncoder` sends by default."""

__all__ = [
    "RAW_VALUE",
    "BytesEncoder",
    "SchemaIdIn",
    "SubjectStrategy",
    "check_schema_id_in",
    "check_subject_strategy",
    "frame_bodies",
    "registered_schema",
    "subject_name",
]

SubjectStrategy = Literal["topic", "record", "topic_record"]
"""Confluent subject naming: ``<topic>-value``, ``<record>``, ``<topic>-<record>``."""
SchemaIdIn = Literal["payload", "header"]
"""Where the schema reference travels: the payload prefix (magic 0 + id) or a header."""
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


class BytesEncoder:
    """Pass a binary column through as the Kafka value: no codec, no framing.

    The raw lane's ``_twg_source_value`` column goes back to Kafka byte for byte; a
    null value stays null (a tombstone).

    Args:
        column: The binary (or string) column to send.

    Example:
        >>> import pyarrow as pa
        >>> enc = BytesEncoder()
        >>> batch = pa.record_batch({"_twg_source_value": pa.array([b"a", None])})
        >>> enc.encode_batch(batch, topic="t").values.to_pylist()
        [b'a', None]
    """

    def __init__(self, column: str = RAW_VALUE) -> None:
        if not isinstance(column, str) or not column:
            msg = f"bytes encoder: `column` expected a column name; got {column!r}"
            raise ConfigError(msg)
        self._column = column

    @property
    def name(self) -> str:
        """``bytes``."""
        return "bytes"

    def __repr__(self) -> str:
        return f"BytesEncoder(column={self._column!r})"

    def encode_batch(self, batch: pa.RecordBatch, *, topic: str) -> EncodedValues:  # noqa: ARG002 - the protocol's signature
        """The column as a ``binary`` array (zero-copy for binary and string columns).

        Raises:
            EncodeError: When the column is missing or not binary / string.
        """
        idx = batch.schema.get_field_index(self._column)
        if idx < 0:
            msg = (
                f"bytes encoder: expected column `{self._column}` in the batch; got "
                f"columns {batch.schema.names}; pass `column=` naming the payload column"
            )
            raise EncodeError(msg, column=self._column)
        col = batch.column(idx)
        t = col.type
        if pa.types.is_binary(t) or pa.types.is_null(t):
            return EncodedValues(col if pa.types.is_binary(t) else col.cast(pa.binary()))
        if pa.types.is_string(t) or pa.types.is_large_binary(t) or pa.types.is_large_string(t):
            return EncodedValues(pc.cast(col, pa.binary()))
        msg = (
            f"bytes encoder: column `{self._column}` expected binary or string; got "
            f"`{t}`; encode it with a codec encoder instead"
        )
        raise EncodeError(msg, column=self._column)
