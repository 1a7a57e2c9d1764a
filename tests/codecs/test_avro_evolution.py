"""Schema evolution, mixed writer schemas in one batch, and header (GUID) framing."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any, cast

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import header_schema_id_serializer
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from thalweg_bytewax.codecs import FailureKind
from thalweg_bytewax.codecs.avro import AvroCodec, AvroEngine
from thalweg_bytewax.registry import registry_client

V1: dict[str, Any] = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}
V2: dict[str, Any] = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "tier", "type": "string", "default": "basic"},
    ],
}
V3_DROPS_NAME: dict[str, Any] = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "id", "type": "long"}, {"name": "tier", "type": "string"}],
}


def _producer(url: str, schema: dict[str, Any], **conf: Any) -> AvroSerializer:
    conf.setdefault("normalize.schemas", False)
    # Calling confluent-kafka's serializer class gives Any under mypy: name the type.
    ser: AvroSerializer = AvroSerializer(registry_client(url), json.dumps(schema), conf=conf)
    return ser


@pytest.fixture
def url() -> str:
    return f"mock://avro-evo-{uuid.uuid4()}"


def _ctx(headers: list[tuple[str, bytes]] | None = None) -> SerializationContext:
    # The context types its (mutable) headers list as str | bytes | None values; the
    # serializer only appends bytes values to it, so the list stays list[tuple[str, bytes]].
    wide = cast("list[tuple[str, str | bytes | None]] | None", headers)
    return SerializationContext("users", MessageField.VALUE, wide)


@pytest.mark.parametrize("engine", ["polars", "fastavro"])
def test_mid_stream_change_decodes_with_reader_schema(url: str, engine: AvroEngine) -> None:
    p1, p2 = _producer(url, V1), _producer(url, V2)
    payloads = [
        p1({"id": 1, "name": "a"}, _ctx()),
        p2({"id": 2, "name": "b", "tier": "gold"}, _ctx()),
    ]
    payloads += [p1({"id": 3, "name": "c"}, _ctx())]
    codec = AvroCodec(url, reader_schema=V2, engine=engine)

    result = codec.decode_batch(payloads)

    assert result.errors == []
    assert result.batch.to_pylist() == [
        {"id": 1, "name": "a", "tier": "basic"},
        {"id": 2, "name": "b", "tier": "gold"},
        {"id": 3, "name": "c", "tier": "basic"},
    ]
    assert result.batch.schema == pa.schema(
        [
            pa.field("id", pa.int64(), False),
            pa.field("name", pa.string(), False),
            pa.field("tier", pa.string(), False),
        ]
    )
    assert codec.decode_value(payloads[0]) == {"id": 1, "name": "a", "tier": "basic"}


@pytest.mark.parametrize("engine", ["polars", "fastavro"])
def test_mixed_ids_without_reader_take_the_newest_writer(
    url: str, engine: AvroEngine, caplog: pytest.LogCaptureFixture
) -> None:
    p1, p2 = _producer(url, V1), _producer(url, V2)
    codec = AvroCodec(url, engine=engine)
    first = codec.decode_batch([p1({"id": 1, "name": "a"}, _ctx())])
    assert first.batch.schema.names == ["id", "name"]

    with caplog.at_level(logging.INFO, logger="thalweg_bytewax.codecs.avro"):
        batch = [
            p1({"id": 2, "name": "b"}, _ctx()),
            p2({"id": 3, "name": "c", "tier": "gold"}, _ctx()),
            p1({"id": 4, "name": "d"}, _ctx()),
        ]
        result = codec.decode_batch(batch)
        codec.decode_batch(batch)  # the same change again: no second log line

    assert result.errors == []
    assert result.batch.to_pylist() == [
        {"id": 2, "name": "b", "tier": None},
        {"id": 3, "name": "c", "tier": "gold"},
        {"id": 4, "name": "d", "tier": None},
    ]
    assert result.batch.schema.field("tier").nullable
    changes = [r for r in caplog.records if "output schema changed" in r.getMessage()]
    assert len(changes) == 1
    assert "schema id 1" in changes[0].getMessage() and "schema id 2" in changes[0].getMessage()


def test_older_writer_with_a_field_the_newest_lacks_is_rejected_not_dropped(url: str) -> None:
    p1, p3 = _producer(url, V1), _producer(url, V3_DROPS_NAME)
    codec = AvroCodec(url)
    result = codec.decode_batch(
        [p1({"id": 1, "name": "a"}, _ctx()), p3({"id": 2, "tier": "x"}, _ctx())]
    )
    assert result.batch.to_pylist() == [{"id": 2, "tier": "x"}]
    assert [(f.index, f.kind) for f in result.errors] == [(0, FailureKind.SCHEMA_MISMATCH)]
    assert "`name`" in result.errors[0].message and "reader_schema" in result.errors[0].message


def test_resolved_schema_is_logged_once_per_schema_id(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    p1 = _producer(url, V1)
    codec = AvroCodec(url)
    with caplog.at_level(logging.INFO, logger="thalweg_bytewax.codecs.avro"):
        for i in range(3):
            codec.decode_batch([p1({"id": i, "name": "x"}, _ctx())])
    resolved = [r for r in caplog.records if "decodes to Arrow schema" in r.getMessage()]
    assert len(resolved) == 1
    assert "id: int64 not null, name: string not null" in resolved[0].getMessage()


@pytest.mark.parametrize("engine", ["polars", "fastavro"])
def test_header_framing_from_confluent_serializer(url: str, engine: AvroEngine) -> None:
    ser = _producer(url, V2, **{"schema.id.serializer": header_schema_id_serializer})
    rows = []
    for i in range(5):
        headers: list[tuple[str, bytes]] = [("trace", b"t")]
        body = ser({"id": i, "name": f"n{i}", "tier": "x"}, _ctx(headers))
        rows.append((body, headers))
    assert rows[0][1][-1][0] == "__value_schema_id" and rows[0][1][-1][1][0] == 1
    prefixed = _producer(url, V2)({"id": 9, "name": "p", "tier": "y"}, _ctx())
    payloads = [b for b, _ in rows] + [prefixed]
    headers_col = [h for _, h in rows] + [None]
    codec = AvroCodec(url, engine=engine)

    result = codec.decode_batch(payloads, headers=headers_col)

    assert result.errors == []
    assert result.batch.column("id").to_pylist() == [0, 1, 2, 3, 4, 9]
    assert codec.decode_value(rows[2][0], headers=rows[2][1]) == {
        "id": 2,
        "name": "n2",
        "tier": "x",
    }
    # The RawBatch headers column shape (list<struct<key, value>>) works too.
    arrow_headers = pa.array(
        [[{"key": k, "value": v} for k, v in h] for (h,) in [(h,) for _, h in rows]],
        pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])),
    )
    again = codec.decode_batch([b for b, _ in rows], headers=arrow_headers)
    assert again.errors == [] and again.batch.column("id").to_pylist() == [0, 1, 2, 3, 4]


def test_framing_none_with_fixed_schema() -> None:
    import io

    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(V1), {"id": 7, "name": "z"})
    codec = AvroCodec(framing="none", schema=V1)
    assert codec.decode_value(buf.getvalue()) == {"id": 7, "name": "z"}
    result = codec.decode_batch([buf.getvalue(), buf.getvalue()[:-1]])
    assert result.batch.to_pylist() == [{"id": 7, "name": "z"}]
    assert [f.kind for f in result.errors] == [FailureKind.MALFORMED]
