"""Encode an Arrow batch for Kafka with each encoder, and read it back.

Run: python docs/examples/encode.py
"""

import datetime as dt
from decimal import Decimal

import pyarrow as pa

from thalweg_bytewax.codecs import (
    AvroCodec,
    AvroEncoder,
    BytesEncoder,
    EncodeError,
    JsonEncoder,
)

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "string"},
        {
            "name": "total",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
        },
        {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "coupon", "type": ["null", "string"], "default": None},
    ],
}
batch = pa.RecordBatch.from_pylist(
    [
        {"order_id": "a-1", "total": Decimal("12.50"), "coupon": None,
         "created_at": dt.datetime(2026, 1, 1, 10, tzinfo=dt.UTC)},
        {"order_id": "a-2", "total": Decimal("7.00"), "coupon": "NEW",
         "created_at": dt.datetime(2026, 1, 1, 11, tzinfo=dt.UTC)},
    ],
    schema=AvroCodec(framing="none", schema=ORDER).arrow_schema,
)  # fmt: skip

# Avro, Confluent framing: the schema is registered under "orders-value" on first use.
avro = AvroEncoder("mock://docs-encode", schema=ORDER, auto_register=True)
out = avro.encode_batch(batch, topic="orders")
print("avro:", out.values[0].as_py()[:5].hex(), "+", len(out.values[0].as_py()) - 5, "bytes")
back = AvroCodec("mock://docs-encode").decode_batch(out.values)
print("round trip equal:", back.batch.equals(batch))

# The schema id in a header instead (confluent-kafka >= 2.16 reads both).
header = AvroEncoder("mock://docs-encode", schema=ORDER, schema_id_in="header")
print("header:", header.encode_batch(batch, topic="orders").headers[0][0][0])  # type: ignore[index]

# JSON: exact text for decimals and instants, one DuckDB pass for the batch.
print("json:", JsonEncoder().encode_batch(batch, topic="orders").values[1].as_py())

# The raw lane back to Kafka: bytes as they came, null values stay tombstones.
raw = pa.record_batch({"_twg_source_value": pa.array([b"\x00\x00\x00\x00\x01...", None])})
print("bytes:", BytesEncoder().encode_batch(raw, topic="orders").values.to_pylist())

# A value the schema cannot hold fails the batch, naming the column and the row.
bad = batch.set_column(0, "order_id", pa.array(["a-1", None]))
try:
    avro.encode_batch(bad, topic="orders")
except EncodeError as exc:
    print("error:", exc)
