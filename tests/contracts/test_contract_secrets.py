"""Contract URLs with credentials: no error, traceback, log line or spec echoes them."""

from __future__ import annotations

import base64
import http.server
import logging
import threading
import traceback
from collections.abc import Iterator

import pytest

from tests.helpers import closed_port
from thalweg_bytewax.contracts import ContractError, ContractSpec, load_contract

SECRETS = ("S3cretPw", "SIGSECRET123", "AKIASECRETKEY", "tok3nvalue")
GOOD = """\
apiVersion: v3.0.2
kind: DataContract
id: urn:test:s
name: s
version: 1.0.0
schema:
  - name: t
    properties:
      - name: id
        logicalType: string
"""
BAD_RULE = GOOD + "    quality:\n      - metric: nope\n        mustBe: 0\n"
SEEN_AUTH: list[str | None] = []


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        SEEN_AUTH.append(self.headers.get("Authorization"))
        path = self.path.split("?")[0]
        body = {"/good.yaml": GOOD, "/bad.yaml": BAD_RULE, "/yaml.yaml": "a: [unclosed"}.get(
            path
        )
        if body is None:
            self.send_response(403)
            self.end_headers()
            self.wfile.write(f"denied {self.path}".encode())
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    # `shutdown` waits for the serving loop to look at its flag, once a poll interval
    # (0.5 s by default).
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    ).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _presigned(host: str, path: str) -> str:
    return (
        f"http://{host}{path}?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIASECRETKEY"
        "%2F20240101&X-Amz-Signature=SIGSECRET123#tok3nvalue"
    )


def _assert_clean(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, (secret, text)


def _assert_error_clean(exc: BaseException, log: str) -> None:
    _assert_clean(str(exc), repr(exc), "".join(traceback.format_exception(exc)), log)


@pytest.mark.parametrize(
    "make_url",
    [
        lambda host: _presigned(host, "/missing.yaml"),  # HTTP 403
        lambda host: f"http://alice:S3cretPw@{host}/missing.yaml",
        lambda host: _presigned(host, "/yaml.yaml"),  # malformed YAML
        lambda host: _presigned(host, "/bad.yaml"),  # a rule the loader refuses
        lambda host: f"http://alice:S3cretPw@127.0.0.1:{closed_port()}/c.yaml",  # refused
        lambda host: f"http://alice:S3cretPw@{host}:notaport/c.yaml",  # invalid URL
        lambda host: "memory://nowhere/c.yaml?token=tok3nvalue&sig=SIGSECRET123",
        lambda host: "s3://bucket/c.yaml?X-Amz-Signature=SIGSECRET123&region=us-east-1",
    ],
    ids=["403", "userinfo-403", "yaml", "rule", "refused", "invalid", "fsspec", "pyarrow-fs"],
)
def test_no_error_echoes_a_secret_of_the_contract_url(base, make_url, caplog):
    with caplog.at_level(logging.DEBUG), pytest.raises(ContractError) as info:
        load_contract(make_url(base))
    _assert_error_clean(info.value, caplog.text)
    assert str(info.value).startswith("contract `")


def test_a_loaded_contract_keeps_only_a_redacted_source(base, caplog):
    with caplog.at_level(logging.DEBUG):
        spec = load_contract(_presigned(base, "/good.yaml"))
    _assert_clean(spec.source, repr(spec), caplog.text)
    assert spec.source.startswith(f"http://{base}/good.yaml?X-Amz-Algorithm=***")
    direct = ContractSpec(None, None, None, (), source="https://u:S3cretPw@h/c?sig=SIGSECRET123")
    _assert_clean(direct.source, repr(direct))
    with pytest.raises(ContractError) as info:
        spec.object("absent")
    _assert_error_clean(info.value, "")


def test_userinfo_is_sent_as_basic_auth_never_in_the_url(base):
    SEEN_AUTH.clear()
    spec = load_contract(f"http://alice:S3cret%40Pw@{base}/good.yaml")
    assert spec.source == f"http://***@{base}/good.yaml"
    assert SEEN_AUTH == ["Basic " + base64.b64encode(b"alice:S3cret@Pw").decode()]
