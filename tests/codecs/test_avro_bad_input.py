"""Bad Avro input never crashes and never vanishes: each bad row is a DecodeFailure.

Every case runs with the fast path on and off; the good rows around a bad one decode.
"""

from __future__ import annotations

import io
import json
import pickle
import uuid
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema

from thalweg_bytewax.codecs import FailureKind
from thalweg_bytewax.codecs.avro import AvroCodec, AvroDecodeError, AvroEngine
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.errors import DecodeError
from thalweg_bytewax.registry import registry_client

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Evt",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
    ],
}
RESERVED: dict[str, Any] = {
    "type": "record",
    "name": "Bad",
    "fields": [{"name": "id", "type": "long"}, {"name": "_twg_source_offset", "type": "long"}],
}


def _body(schema: dict[str, Any], rec: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), rec)
    return buf.getvalue()


@pytest.fixture
def env() -> tuple[str, int, int]:
    url = f"mock://avro-bad-{uuid.uuid4()}"
    client = registry_client(url)
    sid = client.register_schema("evt-value", Schema(json.dumps(SCHEMA)))
    bad = client.register_schema("bad-value", Schema(json.dumps(RESERVED)))
    return url, sid, bad


def _good(sid: int, i: int) -> bytes:
    return encode_confluent(sid, _body(SCHEMA, {"id": i, "name": f"n{i}", "kind": "B"}))


@pytest.mark.parametrize("engine", ["polars", "fastavro"])
def test_every_bad_row_is_reported_and_good_rows_survive(
    env: tuple[str, int, int], engine: AvroEngine
) -> None:
    url, sid, reserved_id = env
    good = _good(sid, 5)
    bad_utf8 = encode_confluent(sid, b"\x02\x04\xff\xfe\x00")  # id=1, name=2 bytes of junk
    bad_enum = encode_confluent(sid, b"\x02\x02a\x08")  # enum index 4 of 2 symbols
    payloads: list[bytes | None] = [
        _good(sid, 0),
        good[:-3],  # 1 truncated body
        _good(sid, 2),
        b"\x07" + good[1:],  # 3 wrong magic byte
        encode_confluent(999, good[5:]),  # 4 unknown schema id
        bad_utf8,  # 5 does not match: invalid UTF-8
        None,  # 6 tombstone
        encode_confluent(reserved_id, _body(RESERVED, {"id": 1, "_twg_source_offset": 2})),  # 7
        b"\x00\x00",  # 8 too short for framing
        good + b"\x00\x00",  # 9 trailing bytes
        bad_enum,  # 10 enum index out of range
        _good(sid, 11),
    ]
    codec = AvroCodec(url, engine=engine)

    result = codec.decode_batch(payloads)

    assert result.batch.column("id").to_pylist() == [0, 2, 11]
    kinds = {f.index: f.kind for f in result.errors}
    assert kinds == {
        1: FailureKind.MALFORMED,
        3: FailureKind.BAD_FRAMING,
        4: FailureKind.UNKNOWN_SCHEMA,
        5: FailureKind.MALFORMED,
        6: FailureKind.NULL_PAYLOAD,
        7: FailureKind.RESERVED_FIELD,
        8: FailureKind.BAD_FRAMING,
        9: FailureKind.MALFORMED,
        10: FailureKind.MALFORMED,
    }
    msgs = {f.index: f.message for f in result.errors}
    assert f"schema id {sid}" in msgs[1] and "truncated" in msgs[1]
    assert "magic byte 0; got 7" in msgs[3]
    assert "schema id 999" in msgs[4] and url in msgs[4]
    assert "UTF-8" in msgs[5]
    assert "tombstone" in msgs[6]
    assert "`_twg_source_offset`" in msgs[7] and "`_twg_`" in msgs[7]
    assert "too short" in msgs[8]
    assert "2 bytes left over" in msgs[9]
    assert f"schema id {sid}" in msgs[10]
    assert result.ok_indices(len(payloads)).to_pylist() == [0, 2, 11]


def test_decode_value_raises_decode_errors_with_kind(env: tuple[str, int, int]) -> None:
    url, sid, reserved_id = env
    codec = AvroCodec(url)
    cases = {
        FailureKind.MALFORMED: _good(sid, 1)[:-2],
        FailureKind.UNKNOWN_SCHEMA: encode_confluent(4242, b"\x02"),
        FailureKind.RESERVED_FIELD: encode_confluent(
            reserved_id, _body(RESERVED, {"id": 1, "_twg_source_offset": 2})
        ),
        FailureKind.BAD_FRAMING: b"\x05abcdef",
        FailureKind.NULL_PAYLOAD: None,
    }
    for kind, payload in cases.items():
        with pytest.raises(DecodeError) as info:
            codec.decode_value(payload)
        assert getattr(info.value, "kind", None) is kind, kind
    assert codec.decode_value(_good(sid, 3)) == {"id": 3, "name": "n3", "kind": "B"}


def test_custom_metadata_prefix(env: tuple[str, int, int]) -> None:
    url, _, reserved_id = env
    payload = encode_confluent(reserved_id, _body(RESERVED, {"id": 1, "_twg_source_offset": 2}))
    codec = AvroCodec(url, metadata_prefix="meta_")
    assert codec.decode_value(payload) == {"id": 1, "_twg_source_offset": 2}


def test_decode_error_pickles() -> None:
    err = AvroDecodeError("avro schema id 3: bad", FailureKind.MALFORMED)
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and back.kind is FailureKind.MALFORMED


def test_all_bad_batch_has_the_output_schema(env: tuple[str, int, int]) -> None:
    url, sid, _ = env
    codec = AvroCodec(url)
    codec.decode_batch([_good(sid, 1)])
    result = codec.decode_batch(pa.array([None, b"\x01"], pa.binary()))
    assert result.batch.num_rows == 0
    assert result.batch.schema == codec.arrow_schema
    assert [f.index for f in result.errors] == [0, 1]


@pytest.mark.parametrize("payloads", [[], [b"\xff\xff\xff", None]], ids=["none", "all-bad"])
def test_a_batch_without_good_rows_is_empty_with_every_type_a_general_union_included(
    payloads: list[bytes | None],
) -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "u", "type": ["null", "string", "long"]},
            {"name": "n", "type": "long"},
            {"name": "xs", "type": {"type": "array", "items": ["string", "double"]}},
        ],
    }
    codec = AvroCodec(schema=schema, framing="none")
    result = codec.decode_batch(payloads)
    assert result.batch.num_rows == 0
    assert result.batch.schema == codec.arrow_schema
    assert pa.types.is_union(result.batch.schema.field("u").type)
    assert len(result.errors) == len(payloads)
