"""Private descriptor pools for Protobuf: from a FileDescriptorSet or a schema registry.

Every pool is a fresh :class:`~google.protobuf.descriptor_pool.DescriptorPool`, never the
process-wide default pool, so two codecs (or two schema versions) never collide. The
well-known types (Timestamp, Duration, wrappers, Struct, Any, ...) are added first, unless
the descriptor set brings its own copy of the same file.

The registry integration point is :class:`RegistryDescriptors`, over
:mod:`thalweg_bytewax.registry` schema sources.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FileDescriptor

from thalweg_bytewax.codecs.base import FailureKind
from thalweg_bytewax.errors import ConfigError, DecodeError, SchemaError
from thalweg_bytewax.registry import UnknownSchemaError, schema_source

__all__ = [
    "DescriptorSetInput",
    "RegistryDescriptors",
    "SchemaLookupError",
    "load_descriptor_set",
    "message_by_indexes",
    "message_in_set",
    "pool_from_files",
]

logger = logging.getLogger(__name__)

DescriptorSetInput = str | os.PathLike[str] | bytes | descriptor_pb2.FileDescriptorSet
"""A ``.pb`` path, serialized ``FileDescriptorSet`` bytes, or the message itself."""

# The well-known types every pool holds (google/protobuf/<name>.proto), as modules.
_WELL_KNOWN = tuple(
    importlib.import_module(f"google.protobuf.{name}_pb2")
    for name in ("any", "duration", "empty", "field_mask", "struct", "timestamp", "wrappers")
)
# Imports a registry never sends as references: the client treats these prefixes as
# built in (confluent-kafka ``_is_builtin``), so the pool must already hold them.
_BUILTIN_PREFIXES = ("google/protobuf/", "confluent/")


class SchemaLookupError(DecodeError):
    """A payload's schema reference cannot be resolved to a message type."""

    __module__ = "thalweg_bytewax.codecs.protobuf"

    default_kind = FailureKind.UNKNOWN_SCHEMA


def load_descriptor_set(source: DescriptorSetInput) -> descriptor_pb2.FileDescriptorSet:
    """Read a FileDescriptorSet from a path, bytes, or pass one through.

    Raises:
        ConfigError: When the path is missing or the bytes do not parse.
    """
    if isinstance(source, descriptor_pb2.FileDescriptorSet):
        return source
    if isinstance(source, bytes):
        data, where = source, "bytes"
    else:
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as exc:
            msg = f"protobuf codec: cannot read descriptor set `{path}`: {exc.strerror}"
            raise ConfigError(msg) from exc
        where = f"`{path}`"
    fds = descriptor_pb2.FileDescriptorSet()
    try:
        fds.ParseFromString(data)
    except Exception as exc:
        msg = (
            f"protobuf codec: descriptor set {where} is not a serialized FileDescriptorSet "
            f"(hint: `protoc --include_imports --descriptor_set_out=...`)"
        )
        raise ConfigError(msg) from exc
    if not fds.file:
        msg = f"protobuf codec: descriptor set {where} holds no files"
        raise ConfigError(msg)
    return fds


def _topological(files: Sequence[descriptor_pb2.FileDescriptorProto]) -> list[Any]:
    by_name = {f.name: f for f in files}
    done: set[str] = set()
    order: list[descriptor_pb2.FileDescriptorProto] = []

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in done or name not in by_name:
            return
        if name in stack:
            msg = f"protobuf codec: import cycle through `{name}`"
            raise SchemaError(msg)
        for dep in by_name[name].dependency:
            visit(dep, (*stack, name))
        done.add(name)
        order.append(by_name[name])

    for f in files:
        visit(f.name, ())
    return order


def pool_from_files(
    files: Iterable[descriptor_pb2.FileDescriptorProto],
) -> descriptor_pool.DescriptorPool:
    """A new private pool holding the well-known types and ``files`` (any order).

    Raises:
        SchemaError: When a file does not build (missing import, duplicate symbol).
    """
    files = list(files)
    names = {f.name for f in files}
    pool = descriptor_pool.DescriptorPool()
    for mod in _WELL_KNOWN:
        if mod.DESCRIPTOR.name not in names:
            pool.AddSerializedFile(mod.DESCRIPTOR.serialized_pb)
    for f in _topological(files):
        try:
            pool.Add(f)
        except (TypeError, ValueError) as exc:
            msg = f"protobuf codec: file `{f.name}` does not build: {exc}"
            raise SchemaError(msg) from exc
    return pool


def message_in_set(
    fds: descriptor_pb2.FileDescriptorSet, message_type: str | None, who: str
) -> Descriptor:
    """The message ``message_type`` names in ``fds``, or the first of its last file.

    Args:
        fds: The descriptor set (its last file is the one a ``.pb`` was compiled for).
        message_type: A fully qualified message name, or None for the default.
        who: Who asks, as messages name it (``"protobuf codec"``).

    Raises:
        ConfigError: When the last file declares no message, or ``message_type`` is
            not in the set.
        SchemaError: When a file of the set does not build.
    """
    pool = pool_from_files(fds.file)
    if message_type is None:
        last = pool.FindFileByName(fds.file[-1].name)
        if not last.message_types_by_name:
            msg = f"{who}: `{last.name}` declares no message; pass `message_type`"
            raise ConfigError(msg)
        return next(iter(last.message_types_by_name.values()))
    try:
        return pool.FindMessageTypeByName(message_type)
    except KeyError as exc:
        msg = (
            f"{who}: message type `{message_type}` is not in the descriptor set; expected "
            f"a fully qualified name, e.g. `package.Message`"
        )
        raise ConfigError(msg) from exc


def message_by_indexes(file: FileDescriptor, indexes: Sequence[int]) -> Descriptor:
    """The message a Confluent message-index array names within ``file``.

    ``[1, 0]`` is the first nested message of the second top-level message.

    Raises:
        SchemaLookupError: (``bad_framing``) when an index is out of range.
    """
    candidates = list(file.message_types_by_name.values())
    desc: Descriptor | None = None
    for idx in indexes:
        if idx >= len(candidates):
            where = "top-level" if desc is None else f"nested in `{desc.full_name}`"
            msg = (
                f"message index {list(indexes)} does not exist in `{file.name}`: "
                f"expected index < {len(candidates)} {where} messages; got {idx}"
            )
            raise SchemaLookupError(msg, FailureKind.BAD_FRAMING)
        desc = candidates[idx]
        candidates = list(desc.nested_types)
    if desc is None:
        msg = f"empty message-index array for `{file.name}`"
        raise SchemaLookupError(msg, FailureKind.BAD_FRAMING)
    return desc


def _decode_schema_str(text: str, where: str) -> descriptor_pb2.FileDescriptorProto:
    try:
        raw = base64.b64decode(text, validate=True)
        fdp = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, Exception) as exc:
        msg = (
            f"protobuf codec: {where} is not a base64 serialized FileDescriptorProto "
            f"(the registry must answer `format=serialized`; .proto text needs protoc)"
        )
        raise SchemaError(msg) from exc
    return fdp


class RegistryDescriptors:
    """Resolve schema ids / GUIDs to files in private pools, references included.

    Lookups go through :func:`thalweg_bytewax.registry.schema_source` (a Confluent
    registry, ``mock://`` included, or a local schema directory), which caches, retries
    an unreachable registry and raises ``UnknownSchemaError`` for an unknown id. Here
    that becomes a :class:`SchemaLookupError` (``unknown_schema``); an outage propagates,
    because it is not bad data. One pool per schema, cached for the life of the codec.

    Args:
        registry: Anything :func:`~thalweg_bytewax.registry.schema_source` accepts.
    """

    def __init__(self, registry: Any) -> None:
        self._source = schema_source(registry)
        self._files: dict[int | str, FileDescriptor] = {}
        self._lock = threading.Lock()

    @property
    def description(self) -> str:
        """Where schemas come from, safe for logs."""
        return self._source.description

    def file_for(self, key: int | str) -> FileDescriptor:
        """The root file of schema id ``key`` (an ``int``) or GUID (a ``str``)."""
        found = self._files.get(key)
        if found is not None:
            return found
        with self._lock:
            if key not in self._files:
                self._files[key] = self._load(key)
            return self._files[key]

    def _load(self, key: int | str) -> FileDescriptor:
        try:
            resolved = self._source.get(key, fmt="serialized")
        except UnknownSchemaError as exc:
            what = "schema id" if isinstance(key, int) else "schema guid"
            msg = f"{what} {key} is unknown to `{self._source.description}`"
            raise SchemaLookupError(msg) from exc
        if resolved.schema_type.upper() != "PROTOBUF":
            msg = f"schema {key} is a {resolved.schema_type} schema; expected PROTOBUF"
            raise SchemaLookupError(msg, FailureKind.SCHEMA_MISMATCH)
        if resolved.raw is not None:  # a local .pb: a whole FileDescriptorSet
            fds = load_descriptor_set(resolved.raw)
            pool = pool_from_files(fds.file)
            return pool.FindFileByName(fds.file[-1].name)
        files = []
        for name, ref in resolved.references.items():
            if name.startswith(_BUILTIN_PREFIXES):
                continue
            fdp = _decode_schema_str(ref.schema_str, f"reference `{name}`")
            fdp.name = name
            files.append(fdp)
        root = _decode_schema_str(resolved.schema_str, f"schema {key}")
        root.name = f"__registry_schema_{key}.proto"
        pool = pool_from_files([*files, root])
        logger.info("resolved protobuf schema %s with %d reference(s)", key, len(files))
        return pool.FindFileByName(root.name)
