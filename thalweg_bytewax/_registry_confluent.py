"""Confluent-compatible registry lookups: shared ``mock://`` clients, bounded retries.

Private to :mod:`thalweg_bytewax.registry`, which re-exports every public name.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, Literal

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from thalweg_bytewax.errors import ConfigError

try:  # confluent-kafka's registry client uses httpx2 when present, else httpx
    import httpx2 as _httpx
except ImportError:  # pragma: no cover - depends on the installed client
    import httpx as _httpx  # type: ignore[no-redef]

from thalweg_bytewax._registry_base import (
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
# A comma starts a new URL only when a scheme follows it, so a comma in a password does
# not split the userinfo into a part that escapes redaction.
_URL_SPLIT = re.compile(r",(?=\s*[A-Za-z][A-Za-z0-9+.-]*://)")
_SENSITIVE_PARAMS = ("key", "token", "secret", "password", "passwd", "auth", "credential")
_mock_clients: dict[str, SchemaRegistryClient] = {}
_mock_lock = threading.Lock()


def _redact_query(query: str) -> str:
    parts = []
    for part in query.split("&"):
        name, eq, _value = part.partition("=")
        key = urllib.parse.unquote_plus(name).lower()
        secret = eq and any(word in key for word in _SENSITIVE_PARAMS)
        parts.append(f"{name}=***" if secret else part)
    return "&".join(parts)


def _redact_one(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    # The userinfo runs up to the *last* ``@``: a password may hold ``/``, ``?``, ``#`` or
    # ``@`` itself, which ``urlsplit`` would take for the start of the path, query or host.
    # An ``@`` in the path or query makes this redact more than the userinfo, never less.
    at = rest.rfind("@")
    if at >= 0:
        rest = "***@" + rest[at + 1 :]
    split = urllib.parse.urlsplit(f"{scheme}://{rest}")
    if split.query:
        split = split._replace(query=_redact_query(split.query))
    return urllib.parse.urlunsplit(split)


def redact_url(url: str) -> str:
    """``url`` (or a comma-separated list) with credentials replaced by ``***``.

    The whole userinfo (everything up to the last ``@`` before the host) becomes ``***@``
    and the value of any query parameter whose name mentions a key, token, secret,
    password or auth becomes ``***``.
    """
    return ",".join(_redact_one(part) for part in _URL_SPLIT.split(url))


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
    here after references are resolved. Only the registry's own "not found" answers (404
    with error code 40400-40406) raise :class:`UnknownSchemaError`. A transport error, a
    5xx, a 429 or a 404 without such a code (a gateway page) is retried
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
                if status == 404 and exc.error_code in _NOT_FOUND_CODES:
                    msg = f"schema registry `{self._url}`: {what} not found ({exc.error_message})"
                    raise UnknownSchemaError(msg) from exc
                if status not in _RETRIABLE_STATUS and status != 404:
                    msg = (
                        f"schema registry `{self._url}`: {what} failed with HTTP {status} "
                        f"(error code {exc.error_code}); check the registry URL and credentials"
                    )
                    raise RegistryError(msg) from exc
                cause: Exception = exc
                reason = f"HTTP {status} (error code {exc.error_code})"
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
