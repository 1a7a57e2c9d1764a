"""Protobuf encoder: Arrow batches to Confluent-framed (or bare) Protobuf messages.

The messages are written column by column (:mod:`thalweg_bytewax.codecs._proto_write`);
this module finds the message type (a descriptor set, or the registry), binds a topic
to its subject, schema id and message indexes, and frames the bodies.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka.schema_registry import Schema, SchemaReference
from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.descriptor_pb2 import FileDescriptorProto

from thalweg_bytewax.codecs._encode import (
    RegistryEncoder,
    SchemaIdIn,
    SubjectStrategy,
    registered_schema,
    schema_id_of_type,
)
from thalweg_bytewax.codecs._proto_pool import (
    DescriptorSetInput,
    RegistryDescriptors,
    load_descriptor_set,
    message_in_set,
)
from thalweg_bytewax.codecs._proto_write import write_messages
from thalweg_bytewax.codecs.base import EncodedValues, Framing
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX
from thalweg_bytewax.registry import RegistrySchemaSource

__all__ = ["ProtobufEncoder", "message_indexes"]

logger = logging.getLogger(__name__)
_WELL_KNOWN = "google/protobuf/"


def message_indexes(desc: Descriptor) -> list[int]:
    """The Confluent message-index path of ``desc`` in its file (``[0]``: first message)."""
    path: list[int] = []
    cur: Descriptor | None = desc
    while cur is not None:
        parent = cur.containing_type
        siblings = (
            list(parent.nested_types)
            if parent is not None
            else list(cur.file.message_types_by_name.values())
        )
        path.append(siblings.index(cur))
        cur = parent
    return path[::-1]


@dataclass(frozen=True)
class _Bound:
    desc: Descriptor
    schema_id: int
    guid: str | None
    indexes: list[int]


def _schema_of(file: FileDescriptor, source: RegistrySchemaSource, auto_register: bool) -> Schema:
    """``file`` as a registry schema (base64 descriptor) with its imports as references.

    Imports other than the well-known types are registered (or looked up) under their
    file name, as confluent-kafka's ``ProtobufSerializer`` does.
    """
    refs = []
    for dep in file.dependencies:
        if dep.name.startswith(_WELL_KNOWN):
            continue
        reg = registered_schema_for(dep, source, auto_register)
        refs.append(SchemaReference(dep.name, dep.name, reg))
    proto = FileDescriptorProto()
    file.CopyToProto(proto)
    text = base64.standard_b64encode(proto.SerializeToString()).decode()
    return Schema(text, "PROTOBUF", refs)


def registered_schema_for(
    file: FileDescriptor, source: RegistrySchemaSource, auto_register: bool
) -> int:
    """The version of ``file`` under the subject named after it (registering it first)."""
    schema = _schema_of(file, source, auto_register)
    resolved = registered_schema(
        source, file.name, schema, auto_register=auto_register, encoder="protobuf"
    )
    assert resolved.version is not None  # register / lookup answers carry the version
    return resolved.version


class ProtobufEncoder(RegistryEncoder["_Bound"]):
    r"""Encode Arrow batches to Protobuf messages, one per row, without a per-row loop.

    The batch has the shape :class:`~thalweg_bytewax.codecs.ProtobufCodec` decodes the
    message to (fields by name; ``oneof`` members as nullable columns; ``Timestamp`` as
    ``timestamp[us, UTC]``; wrappers unwrapped; maps as Arrow maps; enums as symbols).
    Top-level columns under the metadata prefix are not written. A null in a field
    without presence, two members of one ``oneof`` set, an unknown enum symbol or a
    value out of range raises ``EncodeError`` naming the column and row.

    Args:
        registry: A registry (``SchemaSource``, client or URL). With ``descriptor_set``
            the message's file is registered (``auto_register``) or looked up under the
            subject; without, the subject's latest version gives the message type.
        descriptor_set: A FileDescriptorSet (``.pb`` path, bytes or message).
        message_type: The fully qualified message name (default: the first message of
            the last file of the set, or of the registered schema).
        subject: A fixed subject name; overrides ``subject_strategy``.
        subject_strategy: ``"topic"``, ``"record"`` (the message's full name) or
            ``"topic_record"``.
        schema_id_in: ``"payload"`` (magic 0 + id + message indexes in front) or
            ``"header"`` (GUID + message indexes in ``__value_schema_id``).
        auto_register: Register the message's file (and its imports) when absent.
        framing: ``"confluent"`` (default) or ``"none"`` (bare messages, needs
            ``descriptor_set``).
        metadata_prefix: Top-level columns under this prefix are not written.
        is_key: Encode Kafka keys (``<topic>-key`` subjects, ``__key_schema_id``).

    Raises:
        ConfigError: On an inconsistent configuration or an unknown ``message_type``.
    """

    def __init__(
        self,
        registry: Any = None,
        descriptor_set: DescriptorSetInput | None = None,
        *,
        message_type: str | None = None,
        subject: str | None = None,
        subject_strategy: SubjectStrategy = "topic",
        schema_id_in: SchemaIdIn = "payload",
        auto_register: bool = False,
        framing: Framing | str = Framing.CONFLUENT,
        metadata_prefix: str = DEFAULT_PREFIX,
        is_key: bool = False,
    ) -> None:
        super().__init__(
            "protobuf",
            subject=subject,
            subject_strategy=subject_strategy,
            schema_id_in=schema_id_in,
            auto_register=auto_register,
            framing=framing,
            metadata_prefix=metadata_prefix,
            is_key=is_key,
        )
        self._message_type = message_type
        self._desc: Descriptor | None = None
        if descriptor_set is not None:
            self._desc = message_in_set(
                load_descriptor_set(descriptor_set), message_type, "protobuf encoder"
            )
        if self._framing is Framing.NONE:
            if self._desc is None:
                msg = "protobuf encoder: framing 'none' needs descriptor_set= (the message type)"
                raise ConfigError(msg)
        else:
            self._open_registry(registry)
            named = self._desc is not None or message_type is not None
            self._require_record_name(named, subject, "`descriptor_set=` or `message_type=`")

    def __repr__(self) -> str:
        where = self._registry_description()
        return f"ProtobufEncoder(registry={where!r}, message_type={self._message_type!r})"

    def _record_name(self) -> str | None:
        return self._desc.full_name if self._desc is not None else self._message_type

    def _resolve(self, topic: str) -> _Bound:
        assert self._source is not None
        subject = self.subject_for(topic)
        if self._desc is not None:
            if not isinstance(self._source, RegistrySchemaSource):
                msg = (
                    f"protobuf encoder: `descriptor_set=` with {self._source!r} expected a "
                    f"schema registry to assign the schema id; got a schema directory; pass "
                    f"a registry URL, or omit `descriptor_set=` to use the latest version"
                )
                raise ConfigError(msg)
            schema = _schema_of(self._desc.file, self._source, self._auto)
            resolved = registered_schema(
                self._source, subject, schema, auto_register=self._auto, encoder="protobuf"
            )
            desc = self._desc
        else:
            resolved = registered_schema(
                self._source,
                subject,
                None,
                auto_register=False,
                encoder="protobuf",
                fmt="serialized",
            )
            schema_id = schema_id_of_type(
                resolved, subject, schema_type="PROTOBUF", encoder="protobuf"
            )
            file = RegistryDescriptors(self._source).file_for(schema_id)
            desc = self._in_file(file, subject)
        assert resolved.schema_id is not None
        bound = _Bound(desc, resolved.schema_id, resolved.guid, message_indexes(desc))
        logger.info(
            "protobuf encoder: topic %s writes %s with subject %s schema id %s",
            topic,
            desc.full_name,
            subject,
            bound.schema_id,
        )
        return bound

    def _in_file(self, file: FileDescriptor, subject: str) -> Descriptor:
        if self._message_type is None:
            return next(iter(file.message_types_by_name.values()))
        try:
            return file.pool.FindMessageTypeByName(self._message_type)
        except KeyError as exc:
            msg = (
                f"protobuf encoder: subject `{subject}` expected message type "
                f"`{self._message_type}`; got a schema without it; check `message_type`"
            )
            raise SchemaError(msg) from exc

    def encode_batch(self, batch: pa.RecordBatch, *, topic: str) -> EncodedValues:
        """One framed Protobuf message per row of ``batch``, for ``topic``'s subject.

        Raises:
            EncodeError: When a row does not fit the message (names column and row).
            UnknownSchemaError: The subject lacks the schema (and ``auto_register`` is off).
            RegistryUnavailableError: The registry stayed unreachable.
        """
        batch = self._without_metadata(batch)
        if self._framing is Framing.NONE:
            assert self._desc is not None
            return EncodedValues(write_messages(self._desc, batch))
        bound = self._bound_for(topic)
        return self._framed(
            write_messages(bound.desc, batch),
            schema_id=bound.schema_id,
            guid=bound.guid,
            message_indexes=bound.indexes,
        )
