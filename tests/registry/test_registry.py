"""Schema sources: mock:// registry with references, outages, and a local directory."""

from __future__ import annotations

import contextlib
import io
import json
import pickle
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import fastavro
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference

from tests.helpers import closed_port, serve_http
from thalweg_bytewax.codecs import FailureKind
from thalweg_bytewax.codecs.avro import AvroCodec
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.registry import (
    DirectorySchemaSource,
    RegistrySchemaSource,
    RegistryUnavailableError,
    UnknownSchemaError,
    redact_url,
    registry_client,
    schema_source,
)

ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "twg.ref",
    "fields": [{"name": "city", "type": "string"}],
}
CUSTOMER = {
    "type": "record",
    "name": "Customer",
    "namespace": "twg.ref",
    "fields": [{"name": "id", "type": "long"}, {"name": "home", "type": "twg.ref.Address"}],
}


def customer_body(record: dict[str, Any]) -> bytes:
    """The Avro body of a CUSTOMER record (its `home` field references ADDRESS)."""
    named: dict[str, Any] = {}
    fastavro.parse_schema(ADDRESS, named_schemas=named)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(CUSTOMER, named_schemas=named), record)
    return buf.getvalue()


def test_mock_scope_is_shared_and_references_resolve() -> None:
    url = f"mock://reg-{uuid.uuid4()}"
    client = registry_client(url)
    assert registry_client(url) is client
    client.register_schema("address", Schema(json.dumps(ADDRESS)))
    sid = client.register_schema(
        "customer-value",
        Schema(json.dumps(CUSTOMER), references=[SchemaReference("twg.ref.Address", "address", 1)]),
    )
    source = schema_source(url)

    resolved = source.get_by_id(sid)

    assert resolved.schema_type == "AVRO"
    assert list(resolved.references) == ["twg.ref.Address"]
    assert json.loads(resolved.references["twg.ref.Address"].schema_str) == ADDRESS
    assert source.get_by_id(sid) is resolved  # cached
    latest = source.get_version("customer-value")
    assert latest.schema_id == sid and latest.version == 1
    guid = client.get_version("customer-value", 1).guid
    assert guid is not None
    assert source.get_by_guid(guid).schema_str == resolved.schema_str
    # The codec decodes a record whose schema uses the reference.
    payload = encode_confluent(sid, customer_body({"id": 1, "home": {"city": "Lyon"}}))
    for engine in ("polars", "fastavro"):
        result = AvroCodec(url, engine=engine).decode_batch([payload])
        assert result.errors == []
        assert result.batch.to_pylist() == [{"id": 1, "home": {"city": "Lyon"}}]


def test_unknown_id_is_a_lookup_error_not_an_outage() -> None:
    source = schema_source(f"mock://reg-{uuid.uuid4()}")
    with pytest.raises(UnknownSchemaError, match="schema id 77 not found"):
        source.get_by_id(77)


def test_unreachable_registry_retries_then_fails_loudly_naming_the_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = closed_port()
    source = RegistrySchemaSource(
        f"http://user:s3cret@127.0.0.1:{port}",
        max_attempts=3,
        initial_backoff=timedelta(milliseconds=50),
    )
    waits: list[float] = []  # the backoffs between attempts, counted instead of timed
    monkeypatch.setattr("thalweg_bytewax.registry._confluent.time.sleep", waits.append)
    with pytest.raises(RegistryUnavailableError) as info:
        source.get_by_id(1)
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "3 times" in message and "outage" in message
    assert "s3cret" not in message and "s3cret" not in repr(source)
    assert waits == [0.05, 0.1]  # three attempts, a doubling wait between each two
    assert isinstance(info.value, SchemaError)
    back = pickle.loads(pickle.dumps(info.value))
    assert str(back) == message


def test_the_backoffs_are_timedeltas_and_their_old_seconds_keywords_warn_and_land_on_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.warns(DeprecationWarning, match=r"`(initial|max)_backoff_s` is deprecated; pass"):
        old = RegistrySchemaSource(url, max_attempts=4, initial_backoff_s=0.5, max_backoff_s=0.8)
    new = RegistrySchemaSource(
        url,
        max_attempts=4,
        initial_backoff=timedelta(seconds=0.5),
        max_backoff=timedelta(seconds=0.8),
    )
    for source in (old, new):
        waits: list[float] = []
        monkeypatch.setattr("thalweg_bytewax.registry._confluent.time.sleep", waits.append)
        with pytest.raises(RegistryUnavailableError):
            source.get_by_id(1)
        assert waits == [0.5, 0.8, 0.8]  # doubling, capped at max_backoff
    with pytest.raises(ConfigError, match="`max_backoff` expected a datetime.timedelta"):
        RegistrySchemaSource(url, max_backoff=2)  # type: ignore[arg-type]
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(ConfigError, match="got `max_backoff` and its old name `max_backoff_s`"),
    ):
        RegistrySchemaSource(url, max_backoff=timedelta(seconds=1), max_backoff_s=1.0)


@contextlib.contextmanager
def _http_404(body: bytes, content_type: str) -> Iterator[str]:
    with serve_http(lambda _: (404, content_type, body)) as server:
        yield server.url


def test_gateway_404_is_an_outage_not_an_unknown_schema() -> None:
    html = b"<html><body><h1>404 Not Found</h1>nginx</body></html>"
    with _http_404(html, "text/html") as url:
        source = RegistrySchemaSource(
            url, max_attempts=2, initial_backoff=timedelta(milliseconds=10)
        )
        with pytest.raises(RegistryUnavailableError, match="2 times"):
            source.get_by_id(1)
        codec = AvroCodec(
            RegistrySchemaSource(url, max_attempts=2, initial_backoff=timedelta(milliseconds=10))
        )
        with pytest.raises(RegistryUnavailableError):
            codec.decode_batch([encode_confluent(1, b"\x02")])


def test_registry_not_found_code_is_an_unknown_schema() -> None:
    body = json.dumps({"error_code": 40403, "message": "Schema 1 not found"}).encode()
    with _http_404(body, "application/json") as url:
        source = RegistrySchemaSource(
            url, max_attempts=3, initial_backoff=timedelta(milliseconds=10)
        )
        with pytest.raises(UnknownSchemaError, match="schema id 1 not found"):
            source.get_by_id(1)
        result = AvroCodec(source).decode_batch([encode_confluent(1, b"\x02")])
        assert [e.kind for e in result.errors] == [FailureKind.UNKNOWN_SCHEMA]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:pa/ss@reg:8081", "https://***@reg:8081"),
        ("https://user:p@ss@reg:8081", "https://***@reg:8081"),
        ("https://user:p?s#s@reg:8081/x", "https://***@reg:8081/x"),
        ("https://reg:8081/?api_key=SECRET&x=1", "https://reg:8081/?api_key=***&x=***"),
        ("https://reg:8081/p?Access_Token=SECRET#f", "https://reg:8081/p?Access_Token=***#***"),
        ("http://a:1,http://u:p,SECRET@b:2", "http://a:1,http://***@b:2"),
        ("HTTPS://user:SECRET@reg:8081", "HTTPS://***@reg:8081"),
        ("user:SECRET@reg:8081", "***@reg:8081"),
        ("http://u:SECRET,http://x@reg:8081", "http://u:***,http://***@reg:8081"),
        ("mock://scope", "mock://scope"),
    ],
)
def test_redact_url_hides_every_credential(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    for secret in ("ss", "SECRET", "user", "pa/", "p?s"):
        if secret not in shown:
            assert secret not in redact_url(url)


def test_codec_batch_raises_on_outage_instead_of_rejecting_data() -> None:
    port = closed_port()
    codec = AvroCodec(RegistrySchemaSource(f"http://127.0.0.1:{port}", max_attempts=2))
    with pytest.raises(RegistryUnavailableError):
        codec.decode_batch([encode_confluent(1, b"\x02")])


def test_directory_source(tmp_path: Path) -> None:
    (tmp_path / "12.avsc").write_text(json.dumps(CUSTOMER))
    (tmp_path / "twg.ref.Address.avsc").write_text(json.dumps(ADDRESS))
    (tmp_path / "orders").mkdir()
    (tmp_path / "orders" / "1.avsc").write_text(json.dumps(ADDRESS))
    (tmp_path / "orders" / "2.avsc").write_text(json.dumps(CUSTOMER))
    (tmp_path / "named.avsc").write_text(json.dumps(ADDRESS))
    (tmp_path / "types.pb").write_bytes(b"\x0a\x03abc")
    guid = uuid.uuid4()
    ids: dict[int | str | uuid.UUID, str] = {40: "named.avsc", guid: "named.avsc", 41: "types.pb"}
    source = DirectorySchemaSource(tmp_path, ids=ids)

    assert list(source.get_by_id(12).references) == ["twg.ref.Address"]
    assert json.loads(source.get_by_id(40).schema_str) == ADDRESS
    assert json.loads(source.get_by_guid(guid).schema_str) == ADDRESS
    pb = source.get_by_id(41)
    assert pb.schema_type == "PROTOBUF" and pb.raw == b"\x0a\x03abc"
    assert source.get_version("orders").version == 2
    assert json.loads(source.get_version("orders", 1).schema_str) == ADDRESS
    assert source.get_version("named").version == 1
    with pytest.raises(UnknownSchemaError):
        source.get_by_id(13)

    body = customer_body({"id": 5, "home": {"city": "Graz"}})
    codec = AvroCodec(str(tmp_path))
    result = codec.decode_batch([encode_confluent(12, body), encode_confluent(13, b"")])
    assert result.batch.to_pylist() == [{"id": 5, "home": {"city": "Graz"}}]
    assert result.errors[0].kind is FailureKind.UNKNOWN_SCHEMA


def test_bad_sources_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        schema_source(str(tmp_path / "missing"))
    with pytest.raises(ConfigError):
        RegistrySchemaSource("mock://x", max_attempts=0)
    with pytest.raises(ConfigError):
        AvroCodec(None)
    with pytest.raises(ConfigError, match="framing"):
        AvroCodec("mock://x", framing="bogus")
