"""Which message type a Protobuf payload was written with: its frame, then the descriptor.

A descriptor set answers from its own files; a registry from the schema id, asked once
per batch for an id it does not know. The newest schema id of the decoded type becomes
the reader. Private to :mod:`thalweg_bytewax.codecs.protobuf`, which mixes
:class:`WriterTypes` in.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from google.protobuf.descriptor import FileDescriptor

from thalweg_bytewax.codecs._proto_pool import (
    RegistryDescriptors,
    SchemaLookupError,
    message_by_indexes,
)
from thalweg_bytewax.codecs._proto_resolve import ProtobufDecodeError, _Resolved
from thalweg_bytewax.codecs.base import FailureKind, Framing
from thalweg_bytewax.codecs.framing import SchemaRef, peel

__all__ = ["WriterTypes"]

logger = logging.getLogger("thalweg_bytewax.codecs.protobuf")


class _Codec(Protocol):
    """What the writer-type lookup reads and sets of the codec it is mixed into."""

    _framing: Framing
    _max_depth: int
    _prefix: str
    _message_type: str | None
    _by_ref: dict[tuple[int | str, tuple[int, ...]], _Resolved]
    _target: _Resolved | None
    _target_key: int | str | None
    _registry: RegistryDescriptors | None
    _misses: dict[int | str, SchemaLookupError] | None
    _root_file: FileDescriptor | None

    def _check_local(self, ref: SchemaRef) -> _Resolved: ...

    def _check_registry(self, ref: SchemaRef) -> _Resolved: ...

    def _maybe_promote(self, key: int | str, res: _Resolved) -> None: ...


class WriterTypes:
    """The writer type of each payload, and the reader type of the codec."""

    _target: _Resolved | None
    _target_key: int | str | None

    def _resolve(
        self: _Codec, payload: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None
    ) -> tuple[_Resolved, bytes]:
        if payload is None:
            msg = "protobuf payload is null (tombstone)"
            raise ProtobufDecodeError(msg, FailureKind.NULL_PAYLOAD)
        if self._framing is Framing.NONE:
            target = self._target
            assert target is not None  # set in __init__ from the descriptor set
            return target, payload
        ref = peel(payload, headers, protobuf=True)
        body = payload[ref.body_offset :] if ref.body_offset else payload
        if self._registry is None:
            return self._check_local(ref), body
        return self._check_registry(ref), body

    def _check_local(self: _Codec, ref: SchemaRef) -> _Resolved:
        target = self._target
        assert target is not None and self._root_file is not None  # noqa: S101 - set in init
        indexes = ref.message_indexes or (0,)
        key = ("local", indexes)
        if key not in self._by_ref:
            desc = message_by_indexes(self._root_file, indexes)
            if desc is not target.desc:
                msg = (
                    f"message index {list(indexes)} names `{desc.full_name}`; this codec "
                    f"decodes `{target.desc.full_name}`"
                )
                raise SchemaLookupError(msg, FailureKind.SCHEMA_MISMATCH)
            self._by_ref[key] = target
        return self._by_ref[key]

    def _check_registry(self: _Codec, ref: SchemaRef) -> _Resolved:
        indexes = ref.message_indexes or (0,)
        key = (ref.key, indexes)
        res = self._by_ref.get(key)
        if res is None:
            registry = self._registry
            assert registry is not None  # only called with a registry
            misses = self._misses
            if misses is not None and ref.key in misses:
                raise misses[ref.key]
            try:
                file = registry.file_for(ref.key)
            except SchemaLookupError as exc:
                if misses is not None:
                    misses[ref.key] = exc
                raise
            desc = message_by_indexes(file, indexes)
            wanted = self._message_type or (self._target.desc.full_name if self._target else None)
            if wanted is not None and desc.full_name != wanted:
                msg = (
                    f"schema {ref.key} message index {list(indexes)} names "
                    f"`{desc.full_name}`; this codec decodes `{wanted}`"
                )
                raise SchemaLookupError(msg, FailureKind.SCHEMA_MISMATCH)
            res = _Resolved(desc, self._max_depth, self._prefix, f"schema {ref.key}")
            self._by_ref[key] = res
        self._maybe_promote(ref.key, res)
        return res

    def _maybe_promote(self: _Codec, key: int | str, res: _Resolved) -> None:
        # The newest schema id of the type is the reader (ids only grow in a registry).
        current = self._target_key
        newer = current is None or (
            isinstance(key, int) and isinstance(current, int) and key > current
        )
        if newer and res is not self._target:
            if self._target is not None:
                logger.info(
                    "protobuf decode schema of `%s` moves to schema %s", res.desc.full_name, key
                )
            self._target, self._target_key = res, key
