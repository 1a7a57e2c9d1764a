"""Schema sources: a Confluent-compatible registry or a local directory of schema files.

Codecs ask a :class:`SchemaSource` for the writer schema of a payload by integer id
(Confluent wire format), by GUID (header framing) or by subject and version. Every
answer is a :class:`ResolvedSchema`: the raw ``confluent_kafka`` :class:`Schema` (text,
type, references) plus every referenced schema, resolved transitively. Parsing stays in
the codec (Avro in :mod:`thalweg_bytewax.codecs.avro`, Protobuf in its own module).

Two kinds of failure are kept apart, because they need opposite handling:

* an **unknown schema** (the registry answers 404) is bad data: :class:`UnknownSchemaError`,
  which codecs turn into a per-record ``unknown_schema`` failure for the DLQ;
* an **unreachable registry** (connection refused, timeouts, 5xx, 429) is an outage, not
  bad data: the lookup is retried with bounded exponential backoff, then
  :class:`RegistryUnavailableError` names the registry URL (never its credentials) and
  fails the flow loudly.

``mock://<scope>`` URLs give confluent-kafka's in-memory registry. In confluent-kafka
2.16 every ``MockSchemaRegistryClient`` instance has its own store, even for the same
URL; :func:`registry_client` therefore hands out one shared client per ``mock://`` URL in
this process, so a producer-side serializer and a codec built from the same URL see
the same schemas.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from thalweg_bytewax.errors import ConfigError, SchemaError

try:  # confluent-kafka's registry client uses httpx2 when present, else httpx
    import httpx2 as _httpx
except ImportError:  # pragma: no cover - depends on the installed client
    import httpx as _httpx  # type: ignore[no-redef]

__all__ = [
    "DirectorySchemaSource",
    "RegistryError",
    "RegistrySchemaSource",
    "RegistryUnavailableError",
    "ResolvedSchema",
    "SchemaKey",
    "SchemaSource",
    "UnknownSchemaError",
    "redact_url",
    "registry_client",
    "schema_source",
]

logger = logging.getLogger(__name__)

SchemaKey = int | str
"""How a payload names its writer schema: an integer id or a GUID string."""

_T = TypeVar("_T")
"""The result type of a registry call wrapped in retries."""

_FILE_TYPES: dict[str, str] = {".avsc": "AVRO", ".json": "JSON", ".pb": "PROTOBUF"}
_RETRIABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_USERINFO = re.compile(r"//[^/@]*@")
_AVRO_PRIMITIVES = frozenset(
    {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
)
_mock_clients: dict[str, SchemaRegistryClient] = {}
_mock_lock = threading.Lock()


class RegistryError(SchemaError):
    """A schema registry or schema directory could not answer a lookup."""

    def __str__(self) -> str:
        return str(self.args[0])


class RegistryUnavailableError(RegistryError):
    """The registry stayed unreachable after bounded retries: an outage, not bad data."""


class UnknownSchemaError(RegistryError, LookupError):
    """The registry does not know the schema id, GUID or subject version."""


@dataclass(frozen=True)
class ResolvedSchema:
    """A schema as a registry returned it, with every reference resolved.

    Attributes:
        schema: The ``confluent_kafka`` schema object (``schema_str``, ``schema_type``,
            ``references``) exactly as the source returned it.
        references: Every referenced schema, transitively, dependencies first, keyed by
            the reference name (an Avro full name, a ``.proto`` file name).
        schema_id: The registry id, where known.
        guid: The registry GUID, where known.
        subject: The subject it was looked up under, where known.
        version: The subject version, where known.
        raw: The file bytes for binary schema files (a ``.pb`` FileDescriptorSet); then
            ``schema.schema_str`` holds the same bytes in base64.
    """

    schema: Schema
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


def redact_url(url: str) -> str:
    """``url`` with any ``user:password@`` part replaced by ``***@``."""
    return _USERINFO.sub("//***@", url)


def registry_client(url: str, conf: Mapping[str, Any] | None = None) -> SchemaRegistryClient:
    """A registry client for ``url``; ``mock://`` URLs share one client per URL.

    Args:
        url: ``http(s)://host:port`` (comma-separated for several) or ``mock://<scope>``.
        conf: Extra ``SchemaRegistryClient`` settings (``basic.auth.user.info``,
            ``ssl.ca.location`` ...). Never logged.
    """
    full = {**(conf or {}), "url": url}
    if url.startswith("mock://"):
        with _mock_lock:
            client = _mock_clients.get(url)
            if client is None:
                client = SchemaRegistryClient.new_client(full)
                _mock_clients[url] = client
            return client
    return SchemaRegistryClient(full)


class RegistrySchemaSource(SchemaSource):
    """Schemas from a Confluent-compatible schema registry.

    Lookups go through ``confluent_kafka``'s client (and its cache) and are cached again
    here after references are resolved. A transport error, a 5xx or a 429 is retried
    with exponential backoff (``initial_backoff_s`` doubling up to ``max_backoff_s``) for
    at most ``max_attempts`` attempts, then raises :class:`RegistryUnavailableError`.
    Lookups are rare (once per schema id per process), so the blocking wait is bounded
    by roughly the sum of the backoffs.

    Args:
        registry: A configured ``SchemaRegistryClient`` or a registry URL
            (``mock://<scope>`` works offline; see :func:`registry_client`).
        conf: Extra client settings when ``registry`` is a URL. Secrets in here never
            reach a message, log line or repr.
        max_attempts: Attempts per lookup before the registry counts as unavailable.
        initial_backoff_s: First wait between attempts.
        max_backoff_s: Cap on one wait.

    Raises:
        ConfigError: On an invalid URL or setting.
    """

    def __init__(
        self,
        registry: SchemaRegistryClient | str,
        *,
        conf: Mapping[str, Any] | None = None,
        max_attempts: int = 5,
        initial_backoff_s: float = 0.1,
        max_backoff_s: float = 2.0,
    ) -> None:
        super().__init__()
        if max_attempts < 1:
            msg = f"schema registry: expected max_attempts >= 1; got {max_attempts!r}"
            raise ConfigError(msg)
        if isinstance(registry, str):
            # The client's own retry loop sleeps up to 20 s per attempt by default; we
            # retry here instead so the bound is ours and the error names the URL.
            settings = {"max.retries": 0, "timeout": 10, **(conf or {})}
            try:
                self._client = registry_client(registry, settings)
            except (ValueError, TypeError) as exc:
                msg = f"schema registry `{redact_url(registry)}`: invalid configuration ({exc})"
                raise ConfigError(msg) from exc
            urls = registry
        else:
            self._client = registry
            rest = getattr(registry, "_rest_client", None)
            urls = ",".join(getattr(rest, "base_urls", None) or ["<client>"])
        self._url = redact_url(urls)
        self._max_attempts = max_attempts
        self._initial_backoff_s = initial_backoff_s
        self._max_backoff_s = max_backoff_s

    @property
    def client(self) -> SchemaRegistryClient:
        """The underlying ``confluent_kafka`` client (for serializers in tests and tools)."""
        return self._client

    @property
    def description(self) -> str:
        """The registry URL with credentials redacted."""
        return self._url

    def _call(self, what: str, call: Callable[[], _T]) -> _T:
        delay = self._initial_backoff_s
        for attempt in range(1, self._max_attempts + 1):
            try:
                return call()
            except SchemaRegistryError as exc:
                status = exc.http_status_code
                if status == 404:
                    msg = f"schema registry `{self._url}`: {what} not found ({exc.error_message})"
                    raise UnknownSchemaError(msg) from exc
                if status not in _RETRIABLE_STATUS:
                    msg = (
                        f"schema registry `{self._url}`: {what} failed with HTTP {status} "
                        f"(error code {exc.error_code}); check the registry URL and credentials"
                    )
                    raise RegistryError(msg) from exc
                cause: Exception = exc
                reason = f"HTTP {status}"
            except _httpx.TransportError as exc:
                cause = exc
                reason = type(exc).__name__
            if attempt == self._max_attempts:
                msg = (
                    f"schema registry `{self._url}` unreachable: {what} failed "
                    f"{attempt} times (last: {reason}); this is an outage, not bad data — "
                    f"check that the registry is up and reachable"
                )
                raise RegistryUnavailableError(msg) from cause
            logger.warning(
                "schema registry %s: %s failed (%s), attempt %s of %s; retrying in %.2fs",
                self._url,
                what,
                reason,
                attempt,
                self._max_attempts,
                delay,
            )
            time.sleep(delay)
            delay = min(delay * 2, self._max_backoff_s)
        msg = "unreachable"  # pragma: no cover - the loop always returns or raises
        raise AssertionError(msg)

    def _resolve_refs(self, schema: Schema, fmt: str | None) -> dict[str, ResolvedSchema]:
        out: dict[str, ResolvedSchema] = {}
        for ref in schema.references or []:
            if ref.subject is None or ref.version is None or ref.name is None:
                msg = (
                    f"schema registry `{self._url}`: reference {ref.name!r} lacks a subject "
                    f"or version"
                )
                raise RegistryError(msg)
            dep = self.get_version(ref.subject, ref.version, fmt=fmt)
            for name, sub in dep.references.items():
                out.setdefault(name, sub)
            out[ref.name] = dep
        return out

    def _fetch_id(self, schema_id: int, fmt: str | None) -> ResolvedSchema:
        schema = self._call(
            f"schema id {schema_id}", lambda: self._client.get_schema(schema_id, fmt=fmt)
        )
        return ResolvedSchema(schema, self._resolve_refs(schema, fmt), schema_id=schema_id)

    def _fetch_guid(self, guid: str, fmt: str | None) -> ResolvedSchema:
        schema = self._call(
            f"schema guid {guid}", lambda: self._client.get_schema_by_guid(guid, fmt=fmt)
        )
        return ResolvedSchema(schema, self._resolve_refs(schema, fmt), guid=guid)

    def _fetch_version(
        self, subject: str, version: int | Literal["latest"], fmt: str | None
    ) -> ResolvedSchema:
        reg = self._call(
            f"subject `{subject}` version {version}",
            lambda: self._client.get_version(subject, version, fmt=fmt),
        )
        return ResolvedSchema(
            reg.schema,
            self._resolve_refs(reg.schema, fmt),
            schema_id=reg.schema_id,
            guid=reg.guid,
            subject=reg.subject or subject,
            version=reg.version,
        )


class DirectorySchemaSource(SchemaSource):
    """Schemas from a local directory, for offline use: ``.avsc``, ``.pb`` and ``.json``.

    How a lookup finds its file, first match wins:

    * by id ``N``: ``ids[N]`` (a path relative to the directory), else ``N.avsc``,
      ``N.pb`` or ``N.json``;
    * by GUID ``G``: ``ids[G]``, else ``G.avsc`` / ``G.pb`` / ``G.json``;
    * by subject ``S`` and version ``V``: ``S/V.<ext>`` (``latest`` is the highest ``V``),
      else ``S.<ext>`` as the only version, ``1``.

    The extension gives the type: ``.avsc`` Avro, ``.pb`` a binary Protobuf
    FileDescriptorSet (``raw`` holds the bytes, ``schema_str`` their base64), ``.json`` a
    JSON Schema. An Avro schema that names a type it does not define gets it from
    ``<full name>.avsc`` in the same directory, recursively, as a reference.

    Args:
        directory: The schema directory.
        ids: Explicit id or GUID → file mapping, for files not named by id.

    Raises:
        ConfigError: When ``directory`` is not a directory.
    """

    def __init__(
        self, directory: str | Path, *, ids: Mapping[SchemaKey, str] | None = None
    ) -> None:
        super().__init__()
        self._dir = Path(directory)
        if not self._dir.is_dir():
            msg = f"schema directory `{self._dir}`: expected an existing directory"
            raise ConfigError(msg)
        self._ids = {(str(k) if isinstance(k, uuid.UUID) else k): v for k, v in (ids or {}).items()}

    @property
    def description(self) -> str:
        """The directory path."""
        return f"dir:{self._dir}"

    def _find(self, stem: str) -> Path | None:
        for ext in _FILE_TYPES:
            p = self._dir / f"{stem}{ext}"
            if p.is_file():
                return p
        return None

    def _load(self, path: Path, **ids: Any) -> ResolvedSchema:
        schema_type = _FILE_TYPES.get(path.suffix)
        if schema_type is None:
            msg = (
                f"schema directory `{self._dir}`: expected a .avsc, .pb or .json file; "
                f"got `{path.name}`"
            )
            raise RegistryError(msg)
        data = path.read_bytes()
        if schema_type == "PROTOBUF":
            text = base64.b64encode(data).decode("ascii")
            return ResolvedSchema(Schema(text, schema_type), raw=data, **ids)
        text = data.decode("utf-8")
        refs = self._avro_refs(text, path) if schema_type == "AVRO" else {}
        return ResolvedSchema(Schema(text, schema_type), refs, **ids)

    def _avro_refs(self, text: str, path: Path) -> dict[str, ResolvedSchema]:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            msg = f"schema directory `{self._dir}`: `{path.name}` is not valid JSON ({exc})"
            raise RegistryError(msg) from exc
        defined: set[str] = set()
        used: list[str] = []
        _walk_avro_names(doc, None, defined, used)
        out: dict[str, ResolvedSchema] = {}
        for name in used:
            if name in defined or name in out:
                continue
            ref_path = self._dir / f"{name}.avsc"
            if not ref_path.is_file():
                continue  # left for the parser to report as an unknown type
            dep = self._load(ref_path)
            for sub_name, sub in dep.references.items():
                out.setdefault(sub_name, sub)
            out[name] = dep
        return out

    def _fetch_id(self, schema_id: int, fmt: str | None) -> ResolvedSchema:
        return self._fetch_key(schema_id, schema_id=schema_id)

    def _fetch_guid(self, guid: str, fmt: str | None) -> ResolvedSchema:
        return self._fetch_key(guid, guid=guid)

    def _fetch_key(self, key: SchemaKey, **ids: Any) -> ResolvedSchema:
        rel = self._ids.get(key)
        path = self._dir / rel if rel is not None else self._find(str(key))
        if path is None or not path.is_file():
            msg = f"schema directory `{self._dir}`: no schema file for {key!r}"
            raise UnknownSchemaError(msg)
        return self._load(path, **ids)

    def _fetch_version(
        self, subject: str, version: int | Literal["latest"], fmt: str | None
    ) -> ResolvedSchema:
        sub_dir = self._dir / subject
        if sub_dir.is_dir():
            versions = sorted(
                int(p.stem)
                for p in sub_dir.iterdir()
                if p.stem.isdigit() and p.suffix in _FILE_TYPES
            )
            v = versions[-1] if version == "latest" and versions else version
            if v in versions:
                path = next(p for p in sub_dir.iterdir() if p.stem == str(v))
                return self._load(path, subject=subject, version=v)
        elif version in ("latest", 1):
            path = self._find(subject)
            if path is not None:
                return self._load(path, subject=subject, version=1)
        msg = f"schema directory `{self._dir}`: no schema for subject `{subject}` version {version}"
        raise UnknownSchemaError(msg)


def _walk_avro_names(node: Any, namespace: str | None, defined: set[str], used: list[str]) -> None:
    """Collect full names an Avro schema defines and the type names it uses."""
    if isinstance(node, str):
        if node not in _AVRO_PRIMITIVES:
            used.append(node if "." in node or namespace is None else f"{namespace}.{node}")
            used.append(node)
        return
    if isinstance(node, list):
        for item in node:
            _walk_avro_names(item, namespace, defined, used)
        return
    if not isinstance(node, dict):
        return
    t = node.get("type")
    if t in ("record", "error", "enum", "fixed") and isinstance(node.get("name"), str):
        name = node["name"]
        ns = node.get("namespace", namespace)
        full = name if "." in name or not ns else f"{ns}.{name}"
        defined.update({full, name})
        namespace = full.rsplit(".", 1)[0] if "." in full else ns
        for f in node.get("fields", []):
            _walk_avro_names(f.get("type"), namespace, defined, used)
        return
    if t == "array":
        _walk_avro_names(node.get("items"), namespace, defined, used)
    elif t == "map":
        _walk_avro_names(node.get("values"), namespace, defined, used)
    else:
        _walk_avro_names(t, namespace, defined, used)


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
    if isinstance(registry, SchemaRegistryClient):
        return RegistrySchemaSource(registry)
    if isinstance(registry, str) and registry.startswith(("http://", "https://", "mock://")):
        return RegistrySchemaSource(registry, conf=conf)
    if isinstance(registry, str | Path) and Path(registry).is_dir():
        return DirectorySchemaSource(registry)
    shown = redact_url(registry) if isinstance(registry, str) else type(registry).__name__
    msg = (
        f"schema source: expected a SchemaSource, a SchemaRegistryClient, an http(s):// or "
        f"mock:// URL, or a schema directory; got {shown!r}"
    )
    raise ConfigError(msg)
