"""No registry credential ever reaches an error's text, its chain, a repr or a log line.

Each hostile URL below carries the secret ``SECRETx`` (as written and, where encoded,
decoded). Each failing operation (construct, a lookup against a closed port, a lookup
answered by a server that echoes the credentials it received) must fail with a
``ThalwegError`` whose ``str``, ``repr``, chained ``__cause__`` / ``__context__`` texts,
and every log record, are free of it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from tests.helpers import HttpGet, HttpReply, closed_port, serve_http
from thalweg_bytewax.codecs.avro import AvroCodec
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.errors import ConfigError, ThalwegError
from thalweg_bytewax.registry import (
    RegistryError,
    RegistrySchemaSource,
    RegistryUnavailableError,
    UnknownSchemaError,
    redact_url,
    schema_source,
)

SECRETS = ("SECRETx", "SEC%40RETx", "SEC@RETx", "pa,SECRETx", "alice:pa")

# {host} is filled with 127.0.0.1:<port>; {scheme} with http or an upper-case variant.
USABLE = [
    pytest.param("{scheme}://alice:pa,SECRETx@{host}", "pa,SECRETx", id="comma-password"),
    pytest.param("HTTP://alice:SECRETx@{host}", "SECRETx", id="upper-scheme"),
    pytest.param("{scheme}://alice:SEC%40RETx@{host}", "SEC@RETx", id="encoded-at"),
    pytest.param("{scheme}://alice:SECRETx@{host}/", "SECRETx", id="trailing-slash"),
    pytest.param(
        "{scheme}://alice:SECRETx@{host},{scheme}://alice:SECRETx@{host}",
        "SECRETx",
        id="two-urls",
    ),
]
REFUSED = [
    pytest.param("alice:SECRETx@{host}", id="no-scheme"),
    pytest.param("alice:SECRETx@{host},{scheme}://{host}", id="no-scheme-first"),
    pytest.param("{scheme}://{host}/?token=SECRETx", id="query-token"),
    pytest.param("{scheme}://{host}/#SECRETx", id="fragment"),
    pytest.param("ftp://alice:SECRETx@{host}", id="wrong-scheme"),
    pytest.param("{scheme}://alice:p,{scheme}://SECRETx@{host}", id="scheme-in-password"),
    pytest.param("{scheme}://alice:SECRETx@{host}:notaport", id="bad-port"),
    pytest.param("{scheme}://alice:SECRETx@", id="no-host"),
]


def _texts(err: BaseException) -> list[str]:
    out: list[str] = []
    seen: set[int] = set()
    todo: list[BaseException | None] = [err]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        out += [str(e), repr(e), *map(str, e.args)]
        todo += [e.__cause__, e.__context__]
    return out


def _assert_clean(
    err: BaseException, caplog: pytest.LogCaptureFixture, *extra: str
) -> None:
    assert isinstance(err, ThalwegError), f"{type(err).__name__} is not a ThalwegError"
    for text in [*_texts(err), caplog.text, *(r.getMessage() for r in caplog.records)]:
        for secret in (*SECRETS, *extra):
            assert secret not in text, f"{secret!r} leaked in {text!r}"


@contextlib.contextmanager
def _echo_server(status: int, body: Callable[[str, str], bytes]) -> Iterator[tuple[str, list[str]]]:
    """A server answering ``status`` with ``body(path, credentials)``; yields host, seen."""
    seen: list[str] = []

    def answer(get: HttpGet) -> HttpReply:
        auth = get.authorization
        creds = base64.b64decode(auth.split(" ", 1)[-1]).decode() if auth else ""
        seen.append(creds)
        return status, "application/json", body(get.path, f"{auth} {creds}")

    with serve_http(answer) as server:
        yield server.url.removeprefix("http://"), seen


def _json_echo(code: int) -> Callable[[str, str], bytes]:
    return lambda path, creds: json.dumps(
        {"error_code": code, "message": f"no schema at {path} for {creds}"}
    ).encode()


def _html_echo(path: str, creds: str) -> bytes:
    return f"<html>{path} {creds}</html>".encode()


@pytest.fixture(autouse=True)
def _capture_all(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)


@pytest.mark.parametrize("template", REFUSED)
@pytest.mark.parametrize("scheme", ["http", "HTTPS"])
def test_refused_urls_never_echo_the_secret(
    template: str, scheme: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = template.format(scheme=scheme, host=f"127.0.0.1:{closed_port()}")
    for build in (RegistrySchemaSource, schema_source, AvroCodec):
        with pytest.raises(ConfigError) as info:
            build(url)
        _assert_clean(info.value, caplog)
    assert all(s not in redact_url(url) for s in SECRETS)


@pytest.mark.parametrize(("template", "password"), USABLE)
def test_lookup_against_a_closed_port_never_echoes_the_secret(
    template: str, password: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = template.format(scheme="https", host=f"127.0.0.1:{closed_port()}")
    source = RegistrySchemaSource(url, max_attempts=2, initial_backoff=timedelta(milliseconds=10))
    assert all(s not in repr(source) for s in SECRETS)
    with pytest.raises(RegistryUnavailableError) as info:
        source.get_by_id(1)
    _assert_clean(info.value, caplog)
    codec = AvroCodec(RegistrySchemaSource(url, max_attempts=1))
    with pytest.raises(RegistryUnavailableError) as info:
        codec.decode_batch([encode_confluent(1, b"\x02")])
    _assert_clean(info.value, caplog)


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        pytest.param(404, _json_echo(40403), UnknownSchemaError, id="404-not-found"),
        pytest.param(401, _json_echo(40101), RegistryError, id="401-json"),
        pytest.param(403, _html_echo, RegistryError, id="403-html"),
        pytest.param(500, _html_echo, RegistryUnavailableError, id="500-html"),
        pytest.param(404, _html_echo, RegistryUnavailableError, id="404-gateway"),
    ],
)
@pytest.mark.parametrize(("template", "password"), USABLE)
def test_lookup_answered_by_an_echoing_server_never_echoes_the_secret(
    template: str,
    password: str,
    status: int,
    body: Callable[[str, str], bytes],
    error: type[Exception],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with _echo_server(status, body) as (host, seen):
        url = template.format(scheme="http", host=host)
        source = RegistrySchemaSource(
            url, max_attempts=2, initial_backoff=timedelta(milliseconds=10)
        )
        with pytest.raises(error) as info:
            source.get_by_id(1)
    _assert_clean(info.value, caplog, base64.b64encode(f"alice:{password}".encode()).decode())
    # The credentials still reach the registry, decoded, on every request.
    assert seen and set(seen) == {f"alice:{password}"}


def test_client_configuration_errors_name_keys_not_values(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = f"127.0.0.1:{closed_port()}"
    cases: list[tuple[str, dict[str, object]]] = [
        (f"http://alice:SECRETx@{host}", {"basic.auth.user.info": "bob:SECRETx"}),
        (f"http://{host}", {"basic.auth.user.info": "SECRETx"}),
        (f"http://{host}", {"no.such.setting": "SECRETx"}),
        (f"http://{host}", {"ssl.key.password": "SECRETx"}),
        (f"http://{host}", {"timeout": "SECRETx", "cache.capacity": "SECRETx"}),
    ]
    for url, conf in cases:
        with pytest.raises(ConfigError) as info:
            RegistrySchemaSource(url, conf=conf)
        _assert_clean(info.value, caplog)


def test_a_client_built_elsewhere_is_redacted_too(caplog: pytest.LogCaptureFixture) -> None:
    # Its URL is the caller's: httpx logs request URLs (userinfo included) at INFO, so
    # only thalweg's own records are checked here.
    caplog.set_level(logging.DEBUG, logger="thalweg_bytewax")
    caplog.set_level(logging.WARNING)
    with _echo_server(500, _html_echo) as (host, seen):
        client = SchemaRegistryClient({"url": f"http://alice:SECRETx@{host}", "max.retries": 0})
        source = RegistrySchemaSource(
            client, max_attempts=2, initial_backoff=timedelta(milliseconds=10)
        )
        assert "SECRETx" not in repr(source)
        with pytest.raises(RegistryUnavailableError) as info:
            source.get_by_id(1)
    _assert_clean(info.value, caplog, base64.b64encode(b"alice:SECRETx").decode())
    assert seen == ["alice:SECRETx"] * 2


def test_credentials_in_the_url_become_basic_auth() -> None:
    source = RegistrySchemaSource("HTTPS://al%3Bice:pa,s%2Fs@reg.example:8081/base/")
    rest = source.client._rest_client
    assert rest.base_urls == ["https://reg.example:8081/base"]
    assert rest.auth == ("al;ice", "pa,s/s")
    assert repr(source) == "RegistrySchemaSource('HTTPS://***@reg.example:8081/base/')"
