"""``AvroEncoder``: columnar Avro bodies that decode back to the batch, for every type.

The round trip runs on the decoders' own random schemas (``test_avro_property``):
fastavro writes records, ``AvroCodec`` decodes them to a batch, ``AvroEncoder`` encodes
that batch, and the result must be byte-identical to fastavro's bodies and decode to
the same batch. Confluent's ``AvroDeserializer`` reads what the encoder writes.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import HealthCheck, given, settings

from tests.codecs.test_avro_property import _cases
from tests.fixtures.budget import examples
from thalweg_bytewax.codecs import AvroCodec, AvroEncoder, EncodeError, Encoder
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.registry import UnknownSchemaError, registry_client

ORDER: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
        },
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
    ],
}
UTC = dt.UTC


def _orders(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i * 10**10 - 7,
            "customer": f"cust-{i}-é",
            "qty": i - 2,
            "note": None if i % 2 else f"n{i}",
            "ts": dt.datetime(2024, 5, 1, tzinfo=UTC) + dt.timedelta(microseconds=i * 12_345_679),
            "amount": Decimal(i * 100_003 - 150_000).scaleb(-2),
            "tags": ["a", "b", "c"][: i % 4],
            "attrs": {f"k{j}": j - i for j in range(i % 3)},
        }
        for i in range(n)
    ]


def _batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        rows, schema=AvroCodec(framing="none", schema=ORDER).arrow_schema
    )


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(_cases())
def test_random_schemas_encode_byte_identical_and_decode_back(
    case: tuple[dict[str, Any], list[Any]],
) -> None:
    schema, records = case
    parsed = fastavro.parse_schema(schema)
    bodies = []
    for rec in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        bodies.append(buf.getvalue())
    codec = AvroCodec(framing="none", schema=schema)
    decoded = codec.decode_batch(bodies)
    assert decoded.errors == []
    out = AvroEncoder(framing="none", schema=schema).encode_batch(decoded.batch, topic="t")
    assert out.values.to_pylist() == bodies
    assert codec.decode_batch(out.values).batch.equals(decoded.batch)


def test_confluent_deserializer_reads_payload_and_header_framing() -> None:
    url = f"mock://encode-avro-{uuid.uuid4().hex}"
    rows = _orders(9)
    batch = _batch(rows)
    deser = AvroDeserializer(registry_client(url))
    for where in ("payload", "header"):
        enc = AvroEncoder(url, schema=ORDER, auto_register=True, schema_id_in=where)
        assert isinstance(enc, Encoder)
        out = enc.encode_batch(batch, topic="orders")
        for i, value in enumerate(out.values.to_pylist()):
            headers: list[tuple[str, str | bytes | None]] | None = (
                None if out.headers is None else [(k, v) for k, v in out.headers[i]]
            )
            ctx = SerializationContext("orders", MessageField.VALUE, headers)
            assert deser(value, ctx) == rows[i]
        codec = AvroCodec(url)
        header_col = out.headers if out.headers is not None else None
        assert codec.decode_batch(out.values, headers=header_col).batch.equals(batch)
    reg = registry_client(url).get_latest_version("orders-value")
    assert json.loads(reg.schema.schema_str or "{}")["name"] == "Order"


def test_subject_strategies_lookup_and_latest_version() -> None:
    url = f"mock://encode-avro-{uuid.uuid4().hex}"
    batch = _batch(_orders(2))
    with pytest.raises(UnknownSchemaError, match="subject `orders-value`.*auto_register=True"):
        AvroEncoder(url, schema=ORDER).encode_batch(batch, topic="orders")
    rec = AvroEncoder(url, schema=ORDER, subject_strategy="topic_record", auto_register=True)
    assert rec.subject_for("orders") == "orders-shop.Order"
    rec.encode_batch(batch, topic="orders")
    # Looked up (not registered) under the record-name subject once registered there.
    AvroEncoder(url, schema=ORDER, subject_strategy="record", auto_register=True).encode_batch(
        batch, topic="x"
    )
    looked = AvroEncoder(url, schema=ORDER, subject_strategy="record")
    assert looked.encode_batch(batch, topic="y").values.to_pylist()
    latest = AvroEncoder(url, subject="orders-shop.Order")
    out = latest.encode_batch(batch, topic="orders")
    assert AvroCodec(url).decode_batch(out.values).batch.equals(batch)
    with pytest.raises(ConfigError, match="subject_strategy 'record' expected `schema=`"):
        AvroEncoder(url, subject_strategy="record")


@pytest.mark.parametrize(
    ("change", "column", "row", "text"),
    [
        (lambda r: r[3].update(id=None), "id", 3, "got null"),
        (lambda r: r[2].update(qty=2**40), "qty", 2, "expected a value of `int32`"),
        (lambda r: r[1]["tags"].append(None), "tags[]", 1, "got null"),
        (lambda r: r[4].update(amount=Decimal("1e12")), "amount", 4, "more than 12 digits"),
    ],
)
def test_bad_values_name_column_and_row(change: Any, column: str, row: int, text: str) -> None:
    rows = _orders(5)
    change(rows)
    # A loose Arrow schema (nullable, wide) so the bad values reach the encoder.
    loose = {"qty": pa.int64(), "amount": pa.decimal128(30, 2), "tags": pa.list_(pa.string())}
    schema = pa.schema(
        [
            pa.field(f.name, loose.get(f.name, f.type))
            for f in AvroCodec(framing="none", schema=ORDER).arrow_schema
        ]
    )
    batch = pa.RecordBatch.from_pylist(rows, schema=schema)
    enc = AvroEncoder(framing="none", schema=ORDER)
    with pytest.raises(EncodeError, match=text) as info:
        enc.encode_batch(batch, topic="t")
    assert (info.value.column, info.value.row) == (column, row)
    assert f"column `{column}` row {row}" in info.value.message


def test_missing_and_extra_columns() -> None:
    batch = _batch(_orders(3))
    enc = AvroEncoder(framing="none", schema=ORDER)
    with pytest.raises(EncodeError, match="expected column `customer`") as info:
        enc.encode_batch(batch.drop_columns(["customer"]), topic="t")
    assert info.value.column == "customer"
    # A field with a default takes it when its column is absent.
    out = enc.encode_batch(batch.drop_columns(["note"]), topic="t")
    back = AvroCodec(framing="none", schema=ORDER).decode_batch(out.values).batch
    assert back.column("note").null_count == 3
    with pytest.raises(EncodeError, match="has column `extra` the schema `shop.Order` lacks"):
        enc.encode_batch(batch.append_column("extra", pa.array([1, 2, 3])), topic="t")
    # Metadata columns (the reserved prefix) are not payload: left out, not an error.
    with_meta = batch.append_column("_twg_source_offset", pa.array([1, 2, 3]))
    plain = enc.encode_batch(batch, topic="t").values
    assert enc.encode_batch(with_meta, topic="t").values.equals(plain)


def test_enum_and_fixed_errors() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
        ],
    }
    enc = AvroEncoder(framing="none", schema=schema)
    ok = pa.record_batch({"e": ["A", "B"], "f": [b"ab", b"cd"]})
    assert enc.encode_batch(ok, topic="t").values.to_pylist() == [b"\x00ab", b"\x02cd"]
    with pytest.raises(
        EncodeError, match="column `e` row 1: expected a symbol of enum `E`; got 'C'"
    ):
        enc.encode_batch(pa.record_batch({"e": ["A", "C"], "f": [b"ab", b"cd"]}), topic="t")
    with pytest.raises(EncodeError, match="column `f` row 0: expected 2 bytes"):
        enc.encode_batch(pa.record_batch({"e": ["A", "B"], "f": [b"abc", b"cd"]}), topic="t")
