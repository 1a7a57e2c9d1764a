"""Confluent-compatible registry lookups: shared ``mock://`` clients, bounded retries.

Private to :mod:`thalweg_bytewax.registry`, which re-exports every public name.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, Literal

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.registry._urls import (
    RegistryUrls,
    clean_cause,
    client_urls,
    parse_registry_urls,
)

try:  # confluent-kafka's registry client uses httpx2 when present, else httpx
    import httpx2 as _httpx
except ImportError:  # pragma: no cover - depends on the installed client
    import httpx as _httpx  # type: ignore[no-redef]

from thalweg_bytewax.registry._base import (
    _T,
    RegistryError,
    RegistryUnavailableError,
    ResolvedSchema,
    SchemaSource,
    UnknownSchemaError,
)

# The facade's logger name, so log configuration and filters keep working.
logger = logging.getLogger("thalweg_bytewax.registry")

_RETRIABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# The registry's own "not found" answers (HTTP 404 with a 404xx error code): 40401 subject,
# 40402 version, 40403 schema, 40404/40406 soft-deleted subject/version, and 40400, which
# the ``mock://`` client uses for every miss. Any other 404 (an HTML page from a gateway
# while the backend is down, a wrong base path: error code -1) says nothing about the
# schema, so it is retried and then reported as an outage, never as unknown data.
_NOT_FOUND_CODES = frozenset({40400, 40401, 40402, 40403, 40404, 40406})
_mock_clients: dict[str, SchemaRegistryClient] = {}
_mock_lock = threading.Lock()


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


_INITIAL_BACKOFF = timedelta(seconds=0.1)
_MAX_BACKOFF = timedelta(seconds=2)


def _backoff(name: str, value: object, old: float | None, default: timedelta) -> float:
    """A backoff keyword in seconds; its deprecated ``<name>_s`` one in seconds warns."""
    if old is not None:
        warnings.warn(
            f"schema registry: `{name}_s` is deprecated; pass `{name}=timedelta(seconds=...)` "
            "(the old name goes in the next release)",
            DeprecationWarning,
            stacklevel=3,
        )
        if value != default:
            msg = f"schema registry: got `{name}` and its old name `{name}_s`; keep `{name}`"
            raise ConfigError(msg)
        value = timedelta(seconds=old) if isinstance(old, int | float) else old
    if not isinstance(value, timedelta) or value < timedelta(0):
        msg = f"schema registry: `{name}` expected a datetime.timedelta >= 0; got {value!r}"
        raise ConfigError(msg)
    return value.total_seconds()


class RegistrySchemaSource(SchemaSource):
    """Schemas from a Confluent-compatible schema registry.

    Lookups go through ``confluent_kafka``'s client (and its cache) and are cached again
    here after references are resolved. Only the registry's own "not found" answers (404
    with error code 40400-40406) raise :class:`UnknownSchemaError`. A transport error, a
    5xx, a 429 or a 404 without such a code (a gateway page) is retried
    with exponential backoff (``initial_backoff`` doubling up to ``max_backoff``) for
    at most ``max_attempts`` attempts, then raises :class:`RegistryUnavailableError`.
    Lookups are rare (once per schema id per process), so the blocking wait is bounded
    by roughly the sum of the backoffs.

    Args:
        registry: A configured ``SchemaRegistryClient`` or a registry URL
            (``mock://<scope>`` works offline; see :func:`registry_client`).
        conf: Extra client settings when ``registry`` is a URL. Secrets in here never
            reach a message, log line or repr.
        max_attempts: Attempts per lookup before the registry counts as unavailable.
        initial_backoff: First wait between attempts (default 0.1 s).
        max_backoff: Cap on one wait (default 2 s).
        initial_backoff_s: Deprecated: ``initial_backoff`` in seconds.
        max_backoff_s: Deprecated: ``max_backoff`` in seconds.

    Raises:
        ConfigError: On an invalid URL or setting.
    """

    def __init__(
        self,
        registry: SchemaRegistryClient | str,
        *,
        conf: Mapping[str, Any] | None = None,
        max_attempts: int = 5,
        initial_backoff: timedelta = _INITIAL_BACKOFF,
        max_backoff: timedelta = _MAX_BACKOFF,
        initial_backoff_s: float | None = None,
        max_backoff_s: float | None = None,
    ) -> None:
        super().__init__()
        if max_attempts < 1:
            msg = f"schema registry: expected max_attempts >= 1; got {max_attempts!r}"
            raise ConfigError(msg)
        first = _backoff("initial_backoff", initial_backoff, initial_backoff_s, _INITIAL_BACKOFF)
        cap = _backoff("max_backoff", max_backoff, max_backoff_s, _MAX_BACKOFF)
        if isinstance(registry, str):
            # The client's own retry loop sleeps up to 20 s per attempt by default; we
            # retry here instead so the bound is ours and the error names the URL.
            urls = parse_registry_urls(registry, {"max.retries": 0, "timeout": 10, **(conf or {})})
            failure: Exception | None = None
            try:
                self._client = registry_client(urls.url, urls.conf)
            except Exception as exc:  # noqa: BLE001 - any client failure is a config error
                failure = exc
            if failure is not None:
                # Raised outside the ``except``: a cause quoting a secret is not chained.
                msg = (
                    f"schema registry `{urls.shown}`: invalid client configuration "
                    f"({type(failure).__name__}: {urls.scrub(str(failure))}); check the "
                    f"settings in `conf`"
                )
                raise ConfigError(msg) from clean_cause(failure, urls)
        else:
            self._client = registry
            rest = getattr(registry, "_rest_client", None)
            urls = client_urls(getattr(rest, "base_urls", None) or [], getattr(rest, "auth", None))
        self._urls: RegistryUrls = urls
        self._url = urls.shown
        self._max_attempts = max_attempts
        self._initial_backoff_s = first
        self._max_backoff_s = cap

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
            failure: Exception
            try:
                return call()
            except (SchemaRegistryError, _httpx.TransportError) as exc:
                failure = exc
            # Decided and raised outside the ``except``: the client's exception is
            # chained only when no text in it quotes a secret (a server may echo the
            # credentials it received), so it is not kept as ``__context__`` either.
            error, reason = self._classify(what, failure, attempt)
            if error is not None:
                raise error from clean_cause(failure, self._urls)
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

    def _classify(
        self, what: str, failure: Exception, attempt: int
    ) -> tuple[RegistryError | None, str]:
        """The error to raise for ``failure`` (``None``: retry) and a short reason."""
        if isinstance(failure, SchemaRegistryError):
            status = failure.http_status_code
            if status == 404 and failure.error_code in _NOT_FOUND_CODES:
                said = self._urls.scrub(str(failure.error_message))
                msg = f"schema registry `{self._url}`: {what} not found ({said})"
                return UnknownSchemaError(msg), ""
            if status not in _RETRIABLE_STATUS and status != 404:
                msg = (
                    f"schema registry `{self._url}`: {what} failed with HTTP {status} "
                    f"(error code {failure.error_code}); check the registry URL and credentials"
                )
                return RegistryError(msg), ""
            reason = f"HTTP {status} (error code {failure.error_code})"
        else:
            reason = type(failure).__name__
        if attempt < self._max_attempts:
            return None, reason
        msg = (
            f"schema registry `{self._url}` unreachable: {what} failed "
            f"{attempt} times (last: {reason}); this is an outage, not bad data — "
            f"check that the registry is up and reachable"
        )
        return RegistryUnavailableError(msg), reason

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

    def register(
        self, subject: str, schema: Schema, *, lookup_only: bool = False
    ) -> ResolvedSchema:
        """Register ``schema`` under ``subject`` (or, with ``lookup_only``, find it there).

        Used by encoders; the answer is cached per (subject, schema text, mode).

        Raises:
            UnknownSchemaError: With ``lookup_only``, when ``subject`` lacks the schema.
            RegistryError: When the registry refuses it (an incompatible schema: 409).
            RegistryUnavailableError: The registry stayed unreachable.
        """
        what = f"{'lookup' if lookup_only else 'registration'} under subject `{subject}`"

        def call() -> ResolvedSchema:
            if lookup_only:
                reg = self._call(what, lambda: self._client.lookup_schema(subject, schema))
            else:
                reg = self._call(
                    what, lambda: self._client.register_schema_full_response(subject, schema)
                )
            return ResolvedSchema(
                schema,
                schema_id=reg.schema_id,
                guid=reg.guid,
                subject=subject,
                version=reg.version,
            )

        key = ("register", subject, schema.schema_str, schema.schema_type, lookup_only)
        return self._cached(key, call)

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
