"""Schema-source core: the lookup errors, :class:`ResolvedSchema` and :class:`SchemaSource`.

Private to :mod:`thalweg_bytewax.registry`, which re-exports every public name.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from thalweg_bytewax.errors import SchemaError, TransientError

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import Schema

# The facade's logger name, so log configuration and filters keep working.
logger = logging.getLogger("thalweg_bytewax.registry")

SchemaKey = int | str
"""How a payload names its writer schema: an integer id or a GUID string."""

_T = TypeVar("_T")
"""The result type of a registry call wrapped in retries."""


class RegistryError(SchemaError):
    """A schema registry or schema directory could not answer a lookup.

    Terminal (a refused credential, a bad reference, an unreadable schema file) unless
    it is a :class:`RegistryUnavailableError`.
    """

    __module__ = "thalweg_bytewax.registry"


class RegistryUnavailableError(RegistryError, TransientError):
    """The registry stayed unreachable after bounded retries: an outage, not bad data.

    Transient (``retryable`` is ``True``): the flow stops loudly instead of sending
    records to the DLQ, and a restart once the registry is back decodes them.
    """

    __module__ = "thalweg_bytewax.registry"


class UnknownSchemaError(RegistryError, LookupError):
    """The registry does not know the schema id, GUID or subject version."""

    __module__ = "thalweg_bytewax.registry"


@dataclass(frozen=True)
class SchemaText:
    """A schema as a file holds it: its text and type, nothing a registry adds.

    What :class:`ResolvedSchema` carries for a schema read from a directory, so that
    offline lookups never load confluent-kafka's registry client.

    Attributes:
        schema_str: The schema text (base64 for a binary ``.pb`` descriptor set).
        schema_type: ``AVRO``, ``PROTOBUF`` or ``JSON``.
    """

    schema_str: str
    schema_type: str

    __module__ = "thalweg_bytewax.registry"


@dataclass(frozen=True)
class ResolvedSchema:
    """A schema as a registry returned it, with every reference resolved.

    Attributes:
        schema: The schema exactly as the source returned it: a registry's
            ``confluent_kafka`` ``Schema`` (``schema_str``, ``schema_type``,
            ``references``), or a :class:`SchemaText` read from a schema file.
        references: Every referenced schema, transitively, dependencies first, keyed by
            the reference name (an Avro full name, a ``.proto`` file name).
        schema_id: The registry id, where known.
        guid: The registry GUID, where known.
        subject: The subject it was looked up under, where known.
        version: The subject version, where known.
        raw: The file bytes for binary schema files (a ``.pb`` FileDescriptorSet); then
            ``schema.schema_str`` holds the same bytes in base64.
    """

    schema: Schema | SchemaText
    references: Mapping[str, ResolvedSchema] = field(default_factory=dict)
    schema_id: int | None = None
    guid: str | None = None
    subject: str | None = None
    version: int | None = None
    raw: bytes | None = None

    @property
    def schema_type(self) -> str:
        """``AVRO``, ``PROTOBUF`` or ``JSON``."""
        return self.schema.schema_type or "AVRO"

    @property
    def schema_str(self) -> str:
        """The schema text (base64 for binary descriptors)."""
        return self.schema.schema_str or ""


class SchemaSource:
    """Where codecs get writer schemas from; lookups are cached by the source.

    Subclasses implement :meth:`_fetch_id`, :meth:`_fetch_guid` and
    :meth:`_fetch_version`; the public methods add caching.
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[Any, ...], ResolvedSchema] = {}
        self._lock = threading.Lock()

    @property
    def description(self) -> str:
        """Where schemas come from, safe for logs and messages (no credentials)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.description!r})"

    def _cached(self, key: tuple[Any, ...], fetch: Callable[[], ResolvedSchema]) -> ResolvedSchema:
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        resolved = fetch()
        with self._lock:
            self._cache[key] = resolved
        return resolved

    def get_by_id(self, schema_id: int, *, fmt: str | None = None) -> ResolvedSchema:
        """The schema registered under ``schema_id``, with references resolved.

        Args:
            schema_id: The registry's integer schema id.
            fmt: A registry output format (``"serialized"`` gives Protobuf schemas as
                base64 descriptors); ignored by directory sources.

        Raises:
            UnknownSchemaError: The id is unknown.
            RegistryUnavailableError: The registry stayed unreachable.
        """
        return self._cached(("id", schema_id, fmt), lambda: self._fetch_id(schema_id, fmt))

    def get_by_guid(self, guid: str | uuid.UUID, *, fmt: str | None = None) -> ResolvedSchema:
        """The schema with ``guid`` (header framing), with references resolved.

        Raises:
            UnknownSchemaError: The GUID is unknown.
            RegistryUnavailableError: The registry stayed unreachable.
        """
        g = str(guid)
        return self._cached(("guid", g, fmt), lambda: self._fetch_guid(g, fmt))

    def get(self, key: SchemaKey, *, fmt: str | None = None) -> ResolvedSchema:
        """Look up by integer id or GUID string (a framing peel's ``SchemaRef.key``)."""
        if isinstance(key, int):
            return self.get_by_id(key, fmt=fmt)
        return self.get_by_guid(key, fmt=fmt)

    def get_version(
        self, subject: str, version: int | Literal["latest"] = "latest", *, fmt: str | None = None
    ) -> ResolvedSchema:
        """The schema of ``subject`` at ``version``; ``latest`` is never cached.

        Raises:
            UnknownSchemaError: The subject or version is unknown.
            RegistryUnavailableError: The registry stayed unreachable.
        """
        if version == "latest":
            return self._fetch_version(subject, version, fmt)
        return self._cached(
            ("version", subject, version, fmt), lambda: self._fetch_version(subject, version, fmt)
        )

    def _fetch_id(self, schema_id: int, fmt: str | None) -> ResolvedSchema:
        raise NotImplementedError

    def _fetch_guid(self, guid: str, fmt: str | None) -> ResolvedSchema:
        raise NotImplementedError

    def _fetch_version(
        self, subject: str, version: int | Literal["latest"], fmt: str | None
    ) -> ResolvedSchema:
        raise NotImplementedError
