"""Schema sources: a Confluent-compatible registry or a local directory of schema files.

Codecs ask a :class:`SchemaSource` for the writer schema of a payload by integer id
(Confluent wire format), by GUID (header framing) or by subject and version. Every
answer is a :class:`ResolvedSchema`: the raw ``confluent_kafka`` :class:`Schema` (text,
type, references) plus every referenced schema, resolved transitively. Parsing stays in
the codec (Avro in :mod:`thalweg_bytewax.codecs.avro`, Protobuf in its own module).

Two kinds of failure are kept apart, because they need opposite handling:

* an **unknown schema** (the registry answers 404 with one of its own "not found" error
  codes, 404xx) is bad data: :class:`UnknownSchemaError`,
  which codecs turn into a per-record ``unknown_schema`` failure for the DLQ;
* an **unreachable registry** (connection refused, timeouts, 5xx, 429, or a 404 without a
  registry error code, e.g. a gateway's HTML page or a wrong base path) is an outage, not
  bad data: the lookup is retried with bounded exponential backoff, then
  :class:`RegistryUnavailableError` names the registry URL (never its credentials) and
  fails the flow loudly.

``mock://<scope>`` URLs give confluent-kafka's in-memory registry. In confluent-kafka
2.16 every ``MockSchemaRegistryClient`` instance has its own store, even for the same
URL; :func:`registry_client` therefore hands out one shared client per ``mock://`` URL in
this process, so a producer-side serializer and a codec built from the same URL see
the same schemas.

confluent-kafka's registry client (and the HTTP and OAuth stack it brings) loads only
when a registry is used: :class:`RegistrySchemaSource` and :func:`registry_client` are
imported on first access, and a :class:`DirectorySchemaSource` never needs them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thalweg_bytewax._lazy import lazy_package
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.registry._base import (
    RegistryError,
    RegistryUnavailableError,
    ResolvedSchema,
    SchemaKey,
    SchemaSource,
    SchemaText,
    UnknownSchemaError,
)
from thalweg_bytewax.registry._directory import DirectorySchemaSource
from thalweg_bytewax.registry._urls import redact_url

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from thalweg_bytewax.registry._confluent import RegistrySchemaSource, registry_client

__all__ = [
    "DirectorySchemaSource",
    "RegistryError",
    "RegistrySchemaSource",
    "RegistryUnavailableError",
    "ResolvedSchema",
    "SchemaKey",
    "SchemaSource",
    "SchemaText",
    "UnknownSchemaError",
    "redact_url",
    "registry_client",
    "schema_source",
]

logger = logging.getLogger(__name__)

# Schemes are case-insensitive (RFC 3986 §3.1); ``HTTPS://`` is a registry URL too.
_URL_PREFIXES = ("http://", "https://", "mock://")
# Loaded from ._confluent on first access (it imports confluent-kafka's registry client).
_CONFLUENT_NAMES = dict.fromkeys(("RegistrySchemaSource", "registry_client"), "._confluent")

__getattr__, __dir__ = lazy_package(__name__, _CONFLUENT_NAMES, globals())


def _is_registry_client(value: object) -> bool:
    """Whether ``value`` is a confluent-kafka ``SchemaRegistryClient``.

    Holding one means its module is loaded already; this never loads it.
    """
    module = sys.modules.get("confluent_kafka.schema_registry")
    return module is not None and isinstance(value, module.SchemaRegistryClient)


def schema_source(
    registry: SchemaSource | SchemaRegistryClient | str | Path,
    *,
    conf: Mapping[str, Any] | None = None,
) -> SchemaSource:
    """Coerce what users pass as ``registry=`` into a :class:`SchemaSource`.

    Args:
        registry: A source (returned as is), a registry client, a registry URL
            (``http(s)://`` or ``mock://``), or a local schema directory path.
        conf: Extra client settings for a registry URL.

    Raises:
        ConfigError: When ``registry`` is none of these.
    """
    if isinstance(registry, SchemaSource):
        return registry
    if _is_registry_client(registry):
        from thalweg_bytewax.registry._confluent import RegistrySchemaSource  # noqa: PLC0415

        return RegistrySchemaSource(registry)  # type: ignore[arg-type]
    if isinstance(registry, str) and registry.strip().lower().startswith(_URL_PREFIXES):
        from thalweg_bytewax.registry._confluent import RegistrySchemaSource  # noqa: PLC0415

        return RegistrySchemaSource(registry, conf=conf)
    if isinstance(registry, str | Path) and Path(registry).is_dir():
        return DirectorySchemaSource(registry)
    shown = redact_url(registry) if isinstance(registry, str) else type(registry).__name__
    msg = (
        f"schema source: expected a SchemaSource, a SchemaRegistryClient, an http(s):// or "
        f"mock:// URL, or a schema directory; got {shown!r}"
    )
    raise ConfigError(msg)
