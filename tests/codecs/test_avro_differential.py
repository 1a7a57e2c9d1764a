"""AvroCodec against confluent-kafka's own AvroSerializer / AvroDeserializer.

A corpus covering every Avro type and logical type is serialised by Confluent's
serializer into a ``mock://`` registry; the reference values are what Confluent's
deserializer returns. ``decode_value`` and ``decode_batch`` (fast and exact path) must
return the same values, and the Arrow schema must be exactly the documented mapping.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.codecs.avro_values import plain
from thalweg_bytewax.codecs import _avro_fast
from thalweg_bytewax.codecs.avro import AvroCodec, AvroEngine
from thalweg_bytewax.dev.samples import ORDER_AVRO_SCHEMA, encode_order_avro, sample_orders
from thalweg_bytewax.registry import registry_client

UTC = dt.UTC
INNER = {
    "type": "record",
    "name": "Inner",
    "fields": [{"name": "x", "type": "int"}, {"name": "tag", "type": ["null", "string"]}],
}
FAST_FIELDS: list[dict[str, Any]] = [
    {"name": "b", "type": "boolean"},
    {"name": "i", "type": "int"},
    {"name": "l", "type": "long"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "s", "type": "string"},
    {"name": "by", "type": "bytes"},
    {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
    {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
    {
        "name": "dec",
        "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3},
    },
    {
        "name": "decf",
        "type": {
            "type": "fixed",
            "name": "Dec8",
            "size": 8,
            "logicalType": "decimal",
            "precision": 12,
            "scale": 2,
        },
    },
    {"name": "dt", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "ltm", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "ltu", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "opt", "type": ["null", "string"], "default": None},
    {"name": "opt_last", "type": ["long", "null"], "default": 7},
    {"name": "nested", "type": INNER},
    {"name": "arr_rec", "type": {"type": "array", "items": "Inner"}},
    {"name": "arr_opt", "type": {"type": "array", "items": ["null", "int"]}},
    {"name": "with_default", "type": "string", "default": "dflt"},
]
EXACT_ONLY_FIELDS: list[dict[str, Any]] = [
    {
        "name": "un",
        "type": [
            "null",
            "int",
            "string",
            {"type": "record", "name": "Point", "fields": [{"name": "y", "type": "double"}]},
        ],
    },
    {"name": "m", "type": {"type": "map", "values": "long"}},
    {"name": "m_rec", "type": {"type": "map", "values": "Inner"}},
    {"name": "nested_enum", "type": {"type": "array", "items": "Color"}},
    {"name": "big_dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 30}},
]
FAST_SCHEMA = {"type": "record", "name": "Fast", "namespace": "twg.t", "fields": FAST_FIELDS}
FULL_SCHEMA = {
    "type": "record",
    "name": "Full",
    "namespace": "twg.t",
    "fields": FAST_FIELDS + EXACT_ONLY_FIELDS,
}

INNER_T = pa.struct([pa.field("x", pa.int32(), False), pa.field("tag", pa.string())])
FAST_ARROW = pa.schema(
    [
        pa.field("b", pa.bool_(), False),
        pa.field("i", pa.int32(), False),
        pa.field("l", pa.int64(), False),
        pa.field("f", pa.float32(), False),
        pa.field("d", pa.float64(), False),
        pa.field("s", pa.string(), False),
        pa.field("by", pa.binary(), False),
        pa.field("fx", pa.binary(4), False),
        pa.field("e", pa.string(), False),
        pa.field("dec", pa.decimal128(10, 3), False),
        pa.field("decf", pa.decimal128(12, 2), False),
        pa.field("dt", pa.date32(), False),
        pa.field("tm", pa.time32("ms"), False),
        pa.field("tu", pa.time64("us"), False),
        pa.field("tsm", pa.timestamp("ms", tz="UTC"), False),
        pa.field("tsu", pa.timestamp("us", tz="UTC"), False),
        pa.field("ltm", pa.timestamp("ms"), False),
        pa.field("ltu", pa.timestamp("us"), False),
        pa.field("u", pa.string(), False),
        pa.field("opt", pa.string()),
        pa.field("opt_last", pa.int64()),
        pa.field("nested", INNER_T, False),
        pa.field("arr_rec", pa.list_(pa.field("item", INNER_T, False)), False),
        pa.field("arr_opt", pa.list_(pa.field("item", pa.int32())), False),
        pa.field("with_default", pa.string(), False),
    ]
)
FULL_ARROW = pa.schema(
    list(FAST_ARROW)
    + [
        pa.field(
            "un",
            pa.union(
                [
                    pa.field("null", pa.null()),
                    pa.field("int", pa.int32()),
                    pa.field("string", pa.string()),
                    pa.field("Point", pa.struct([pa.field("y", pa.float64(), False)])),
                ],
                mode="dense",
                type_codes=[0, 1, 2, 3],
            ),
        ),
        pa.field("m", pa.map_(pa.string(), pa.field("value", pa.int64(), False)), False),
        pa.field("m_rec", pa.map_(pa.string(), pa.field("value", INNER_T, False)), False),
        pa.field("nested_enum", pa.list_(pa.field("item", pa.string(), False)), False),
        pa.field("big_dec", pa.decimal128(30, 0), False),
    ]
)


def _record(k: int, *, full: bool) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "b": k % 2 == 0,
        "i": -(2**31) if k == 1 else k * 1000 - 7,
        "l": 2**62 + k if k % 3 == 0 else -k,
        "f": 1.5 * k,
        "d": -2.25 * k,
        "s": f"héllo-{k}-✓" if k else "",
        "by": bytes(range(k % 7)),
        "fx": bytes([k % 256, 1, 2, 255]),
        "e": ["RED", "GREEN", "BLUE"][k % 3],
        "dec": Decimal(k * 1234567) / 1000 * (-1 if k % 2 else 1),
        "decf": Decimal("-9999999999.99") if k == 2 else Decimal(k) / 100,
        "dt": dt.date(1969, 12, 31) + dt.timedelta(days=k * 400),
        "tm": dt.time(k % 24, 59, 58, 123000),
        "tu": dt.time(23, k % 60, 1, 654321),
        "tsm": dt.datetime(2024, 2, 29, 12, 0, 0, 1000 * k, tzinfo=UTC),
        "tsu": dt.datetime(1960, 1, 1, 0, 0, 0, k, tzinfo=UTC),
        "ltm": dt.datetime(2025, 7, 1, 8, 30, 0, 5000),
        "ltu": dt.datetime(2030, 1, 1, 0, 0, 0, 999999 - k),
        "u": str(uuid.UUID(int=k * 0x1F1F1F1F1F1F1F1F1F1F1F1F)),
        "opt": None if k % 2 else f"o{k}",
        "opt_last": None if k % 3 == 1 else k,
        "nested": {"x": k, "tag": None if k % 2 else "t"},
        "arr_rec": [{"x": j, "tag": str(j)} for j in range(k % 4)],
        "arr_opt": [None, k, None][: k % 4],
        "with_default": f"w{k}",
    }
    if full:
        rec.update(
            {
                "un": [None, k, f"s{k}", {"y": k / 2}][k % 4],
                "m": {f"k{j}": j * k for j in range(k % 3)},
                "m_rec": {"a": {"x": k, "tag": None}} if k % 2 else {},
                "nested_enum": ["BLUE", "RED"][: k % 3],
                "big_dec": Decimal(10**28 + k) * (-1 if k % 2 else 1),
            }
        )
    return rec


def _reference(value: Any) -> Any:
    """Confluent's deserializer output with uuid as text (our documented mapping)."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {k: _reference(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_reference(v) for v in value]
    return value


def _rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    return [{f.name: plain(row[f.name], f.type) for f in batch.schema} for row in batch.to_pylist()]


@pytest.fixture
def url() -> str:
    return f"mock://avro-diff-{uuid.uuid4()}"


def _serialize(url: str, schema: dict[str, Any], records: list[dict[str, Any]]) -> list[bytes]:
    client = registry_client(url)
    ser = AvroSerializer(client, json.dumps(schema))
    ctx = SerializationContext("corpus", MessageField.VALUE)
    return [ser(r, ctx) for r in records]


def _deserialize(url: str, payloads: list[bytes]) -> list[Any]:
    de = AvroDeserializer(registry_client(url))
    ctx = SerializationContext("corpus", MessageField.VALUE)
    return [_reference(de(p, ctx)) for p in payloads]


@pytest.mark.parametrize(
    ("schema", "arrow", "full"),
    [(FAST_SCHEMA, FAST_ARROW, False), (FULL_SCHEMA, FULL_ARROW, True)],
    ids=["fast-subset", "every-type"],
)
@pytest.mark.parametrize("engine", ["polars", "fastavro"])
def test_matches_confluent_deserializer(
    url: str, schema: dict[str, Any], arrow: pa.Schema, full: bool, engine: AvroEngine
) -> None:
    records = [_record(k, full=full) for k in range(40)]
    payloads = _serialize(url, schema, records)
    expected = _deserialize(url, payloads)
    codec = AvroCodec(url, engine=engine)

    result = codec.decode_batch(payloads)

    assert result.errors == []
    assert result.batch.schema == arrow
    assert codec.arrow_schema == arrow
    assert _rows(result.batch) == expected
    assert [codec.decode_value(p) for p in payloads] == expected


def test_fast_subset_is_really_decoded_by_the_fast_path(url: str) -> None:
    records = [_record(k, full=False) for k in range(40)]
    payloads = _serialize(url, FAST_SCHEMA, records)
    codec = AvroCodec(url)
    key = 1
    node = codec._schemas.get(key).node

    assert _avro_fast.supported(node)
    assert not _avro_fast.supported(AvroCodec(url)._schemas.compile(0, "t", FULL_SCHEMA, {}).node)
    header = _avro_fast.ocf_header(_avro_fast.ocf_schema_json(FAST_SCHEMA, {}))
    bodies = pa.array([p[5:] for p in payloads], pa.binary())
    block = _avro_fast.decode_block(header, node, bodies)
    assert block is not None
    assert block.equals(AvroCodec(url, engine="fastavro").decode_batch(payloads).batch)


def test_sample_orders_fast_and_exact_agree(url: str) -> None:
    client = registry_client(url)
    from confluent_kafka.schema_registry import Schema

    sid = client.register_schema("orders-value", Schema(json.dumps(ORDER_AVRO_SCHEMA)))
    orders = list(sample_orders(500))
    payloads = pa.array([encode_order_avro(o, schema_id=sid) for o in orders], pa.binary())

    fast = AvroCodec(url).decode_batch(payloads)
    exact = AvroCodec(url, engine="fastavro").decode_batch(payloads)

    assert fast.errors == exact.errors == []
    assert fast.batch.equals(exact.batch)
    assert fast.batch.column("order_id").to_pylist() == [o["order_id"] for o in orders]
    assert fast.batch.schema.field("status").type == pa.string()
    assert fast.batch.schema.field("total").type == pa.decimal128(12, 2)
