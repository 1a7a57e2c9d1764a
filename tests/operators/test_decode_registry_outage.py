"""A registry outage is transient: it stops ``decode`` loudly, it never dead-letters data.

Against a real local HTTP server that answers 503, or a port that refuses connections:
no record reaches the DLQ as a ``decode`` failure, and the error the flow raises is a
``RegistryUnavailableError`` with ``retryable`` set. A registry that recovers within the
bounded retries decodes every record; a schema the registry does not know (404 with its
own error code) is bad data and goes to the DLQ.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Callable, Iterator
from datetime import timedelta

import pyarrow as pa
import pytest
from bytewax.errors import BytewaxRuntimeError

import thalweg_bytewax.operators as twg
from tests.helpers import (
    HttpGet,
    HttpReply,
    cause_of,
    closed_port,
    raw_values,
    run_flow,
    serve_http,
)
from thalweg_bytewax.codecs import AvroCodec, ProtobufCodec
from thalweg_bytewax.codecs.base import Codec
from thalweg_bytewax.dev.samples import (
    ORDER_AVRO_SCHEMA,
    ORDER_MESSAGE_TYPE,
    encode_order_avro,
    encode_order_proto,
    order_file_descriptor_proto,
    sample_orders,
)
from thalweg_bytewax.errors import TransientError
from thalweg_bytewax.lanes.dlq import rejected_from_dlq_batch
from thalweg_bytewax.registry import RegistrySchemaSource, RegistryUnavailableError

Reply = tuple[int, dict[str, object]]


@contextlib.contextmanager
def _registry(replies: Callable[[int], Reply]) -> Iterator[tuple[str, list[HttpGet]]]:
    """A real HTTP server; ``replies(n)`` answers its n-th request (from 0)."""

    def answer(get: HttpGet) -> HttpReply:
        status, body = replies(get.index)
        return status, "application/vnd.schemaregistry.v1+json", json.dumps(body).encode()

    with serve_http(answer) as server:
        yield server.url, server.requests


UNAVAILABLE: Reply = (503, {"error_code": 50301, "message": "backend unavailable"})


def _schema_reply(codec: str) -> Reply:
    if codec == "avro":
        return 200, {"schema": json.dumps(ORDER_AVRO_SCHEMA)}
    text = base64.b64encode(order_file_descriptor_proto().SerializeToString()).decode()
    return 200, {"schema": text, "schemaType": "PROTOBUF"}


def _codec(codec: str, url: str, attempts: int = 3) -> Codec:
    source = RegistrySchemaSource(
        url, max_attempts=attempts, initial_backoff=timedelta(milliseconds=10)
    )
    if codec == "avro":
        return AvroCodec(source)
    return ProtobufCodec(source, message_type=ORDER_MESSAGE_TYPE)


def _payloads(codec: str, n: int = 5) -> list[bytes]:
    encode = encode_order_avro if codec == "avro" else encode_order_proto
    return [encode(o, schema_id=1) for o in sample_orders(n)]


def _run(
    codec: Codec,
    payloads: list[bytes],
    ok: list[tuple[str, pa.RecordBatch]] | None = None,
    rejected: list[tuple[str, pa.RecordBatch]] | None = None,
) -> tuple[list[pa.RecordBatch], list[pa.RecordBatch]]:
    """Decode one RawBatch of ``payloads``; ``ok`` and ``rejected`` fill even on failure."""
    into = {"ok": [] if ok is None else ok, "rejected": [] if rejected is None else rejected}
    got = run_flow(
        [("orders:0", raw_values(payloads, keys=[b"k"] * len(payloads)))],
        lambda up: twg.decode("decode", up, codec),
        flow_id="decode_outage",
        into=into,
    )
    return [b for _, b in got["ok"]], [b for _, b in got["rejected"]]


@pytest.mark.parametrize("codec", ["avro", "protobuf"])
@pytest.mark.parametrize("outage", ["http-503", "connection-refused"])
def test_an_outage_stops_the_flow_and_dead_letters_nothing(codec: str, outage: str) -> None:
    with contextlib.ExitStack() as stack:
        if outage == "http-503":
            url, seen = stack.enter_context(_registry(lambda _: UNAVAILABLE))
        else:
            url, seen = f"http://127.0.0.1:{closed_port()}", []
        ok: list[tuple[str, pa.RecordBatch]] = []
        rejected: list[tuple[str, pa.RecordBatch]] = []
        with pytest.raises(BytewaxRuntimeError) as info:
            _run(_codec(codec, url), _payloads(codec), ok, rejected)
    assert ok == [] and rejected == []
    error = cause_of(info.value, RegistryUnavailableError)
    assert error.retryable and isinstance(error, TransientError)
    assert url.removeprefix("http://") in str(error) and "3 times" in str(error)
    if outage == "http-503":
        assert len(seen) == 3  # bounded: max_attempts lookups, then the error


@pytest.mark.parametrize("codec", ["avro", "protobuf"])
def test_a_registry_back_within_the_retries_decodes_everything(codec: str) -> None:
    schema = _schema_reply(codec)
    with _registry(lambda n: UNAVAILABLE if n < 2 else schema) as (url, seen):
        ok, rejected = _run(_codec(codec, url, attempts=4), _payloads(codec))
    assert rejected == []
    assert sum(b.num_rows for b in ok) == 5
    assert len(seen) == 3


@pytest.mark.parametrize("codec", ["avro", "protobuf"])
def test_an_unknown_schema_is_bad_data_for_the_dlq(codec: str) -> None:
    missing: Reply = (404, {"error_code": 40403, "message": "Schema 1 not found"})
    with _registry(lambda _: missing) as (url, _seen):
        ok, rejected = _run(_codec(codec, url), _payloads(codec))
    assert ok == []
    rows = [r for b in rejected for r in rejected_from_dlq_batch(b)]
    assert len(rows) == 5
    assert all("(unknown_schema)" in r.message for r in rows)
