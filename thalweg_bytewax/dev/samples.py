r"""Deterministic sample orders: the data of the embedded default flow and the benchmarks.

Orders are generated from a seed, so every run (and every process of a multi-process
run) sees the same records. They are encoded exactly as a real topic would carry them:
Confluent-framed Avro (magic byte 0, the schema id, the Avro body), Confluent-framed
Protobuf, or JSON.

The Protobuf schema mirrors :data:`ORDER_AVRO_SCHEMA`. Protobuf has no decimal, so money
is carried as its exact decimal text (``"123.45"``); the UUID is a string, ``created_at``
a ``google.protobuf.Timestamp``, the coupon a proto3 ``optional`` string. Descriptors are
built programmatically (no ``protoc`` needed) and classes live in a private
:class:`~google.protobuf.descriptor_pool.DescriptorPool`.

Example:
    >>> order = next(sample_orders(1))
    >>> encode_order_avro(order)[:5]  # magic 0, schema id 1
    b'\x00\x00\x00\x00\x01'
    >>> encode_order_proto(order)[:7]  # magic 0, schema id 2, message indexes [2]
    b'\x00\x00\x00\x00\x02\x02\x04'
"""

from __future__ import annotations

import io
import random
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import fastavro
import orjson

from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.dev import _sample_columns as _cols
from thalweg_bytewax.dev._sample_proto import (
    ORDER_MESSAGE_TYPE,
    ORDER_PROTO_SCHEMA_ID,
    encode_order_proto,
    order_descriptor_set,
    order_file_descriptor_proto,
    order_message_class,
    order_to_proto,
)

__all__ = [
    "ORDER_AVRO_SCHEMA",
    "ORDER_JSON_SCHEMA",
    "ORDER_MESSAGE_TYPE",
    "ORDER_PROTO_SCHEMA_ID",
    "ORDER_SCHEMA_ID",
    "encode_order_avro",
    "encode_order_json",
    "encode_order_proto",
    "order_descriptor_set",
    "order_file_descriptor_proto",
    "order_key",
    "order_message_class",
    "order_to_proto",
    "sample_order",
    "sample_order_at",
    "sample_orders",
    "sample_orders_at",
]

ORDER_SCHEMA_ID = 1
"""The schema id sample orders are framed with (the embedded registry registers it)."""

ORDER_AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "thalweg.samples",
    "doc": "A customer order.",
    "fields": [
        {"name": "order_id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "customer_id", "type": "long"},
        {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "status",
            "type": {
                "type": "enum",
                "name": "OrderStatus",
                "symbols": ["PENDING", "PAID", "SHIPPED", "CANCELLED"],
            },
        },
        {"name": "currency", "type": "string"},
        {
            "name": "total",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
        },
        {
            "name": "items",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "OrderItem",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "quantity", "type": "int"},
                        {
                            "name": "unit_price",
                            "type": {
                                "type": "bytes",
                                "logicalType": "decimal",
                                "precision": 10,
                                "scale": 2,
                            },
                        },
                    ],
                },
            },
        },
        {
            "name": "shipping_address",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Address",
                    "fields": [
                        {"name": "line1", "type": "string"},
                        {"name": "city", "type": "string"},
                        {"name": "country", "type": "string"},
                    ],
                },
            ],
            "default": None,
        },
        {"name": "coupon", "type": ["null", "string"], "default": None},
    ],
}
"""The Avro schema of a sample order (nested record, array of records, enum, decimals)."""

ORDER_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "format": "uuid"},
        "customer_id": {"type": "integer"},
        "created_at": {"type": "string", "format": "date-time"},
        "status": {"type": "string", "enum": ["PENDING", "PAID", "SHIPPED", "CANCELLED"]},
        "currency": {"type": "string"},
        "total": {"type": "string"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string"},
                    "quantity": {"type": "integer"},
                    "unit_price": {"type": "string"},
                },
                "required": ["sku", "quantity", "unit_price"],
            },
        },
        "shipping_address": {
            "type": ["object", "null"],
            "properties": {
                "line1": {"type": "string"},
                "city": {"type": "string"},
                "country": {"type": "string"},
            },
            "required": ["line1", "city", "country"],
        },
        "coupon": {"type": ["string", "null"]},
    },
    "required": ["order_id", "customer_id", "created_at", "status", "currency", "total", "items"],
}
"""The sample order as JSON Schema: money as exact decimal text, times as RFC 3339."""

_PARSED = fastavro.parse_schema(ORDER_AVRO_SCHEMA)
_STATUSES = ("PENDING", "PAID", "SHIPPED", "CANCELLED")
_CITIES = (("Lyon", "FR"), ("Porto", "PT"), ("Leeds", "GB"), ("Graz", "AT"), ("Turku", "FI"))
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_START_MS = int(_cols.SAMPLE_START.timestamp() * 1000)


def sample_order(rng: random.Random) -> dict[str, Any]:
    """One order drawn from ``rng`` (Python values as fastavro writes them)."""
    n_items = rng.randint(1, 4)
    items: list[dict[str, Any]] = [
        {
            "sku": f"SKU-{rng.randint(1, 500):04d}",
            "quantity": rng.randint(1, 5),
            "unit_price": Decimal(rng.randint(100, 50_000)) / 100,
        }
        for _ in range(n_items)
    ]
    total = sum((i["unit_price"] * i["quantity"] for i in items), Decimal("0.00"))
    city, country = rng.choice(_CITIES)
    address = (
        None
        if rng.random() < 0.1
        else {"line1": f"{rng.randint(1, 200)} Market Street", "city": city, "country": country}
    )
    return {
        "order_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "customer_id": rng.randint(1, 50_000),
        "created_at": _EPOCH + timedelta(milliseconds=rng.randint(0, 30 * 24 * 3600 * 1000)),
        "status": rng.choice(_STATUSES),
        "currency": "EUR",
        "total": total.quantize(Decimal("0.01")),
        "items": items,
        "shipping_address": address,
        "coupon": rng.choice((None, None, None, "WELCOME10", "SPRING")),
    }


def sample_orders(n: int, *, seed: int = 7) -> Iterator[dict[str, Any]]:
    """``n`` deterministic orders for ``seed``."""
    rng = random.Random(seed)  # noqa: S311 - sample data, not security
    for _ in range(n):
        yield sample_order(rng)


def sample_orders_at(
    indexes: range | Sequence[int], *, seed: int = 7, schema_id: int = ORDER_SCHEMA_ID
) -> tuple[list[bytes], list[bytes], list[int]]:
    """Orders ``indexes`` of ``seed``, encoded: Avro payloads, keys, CreateTimes (ms).

    The one generator of the embedded sample (``flows.orders``) and ``thalweg dev
    produce``: order ``i`` is a pure function of ``(seed, i)``, created ``i`` x 100 ms
    after 2026-01-01T00:00Z give or take up to two seconds, so event time rises with the
    index, a little out of order. Columnar (numpy) and ~10x faster than encoding
    :func:`sample_order_at` dicts, with identical bytes.

    Returns:
        Confluent-framed Avro payloads, keys (the customer id as text) and timestamps.
    """
    cols = _cols.sample_columns(seed, indexes if isinstance(indexes, range) else list(indexes))
    payloads = _cols.avro_bodies(cols, encode_confluent(schema_id, b""))
    keys = [str(c).encode() for c in cols.customer_id.tolist()]
    return payloads, keys, cols.created_ms.tolist()


def sample_order_at(seed: int, index: int) -> dict[str, Any]:
    """Order ``index`` of ``seed`` as a dict (the values :func:`sample_orders_at` encodes)."""
    c = _cols.sample_columns(seed, [index])
    n = int(c.n_items[0])
    items = [
        {
            "sku": f"SKU-{int(c.sku[0, k]):04d}",
            "quantity": int(c.quantity[0, k]),
            "unit_price": Decimal(int(c.unit_cents[0, k])).scaleb(-2),
        }
        for k in range(n)
    ]
    city, country = _cols.CITIES[int(c.city[0])]
    address = (
        {"line1": f"{int(c.street[0])} Market Street", "city": city, "country": country}
        if c.has_address[0]
        else None
    )
    return {
        "order_id": c.uuid_text[0].tobytes().decode(),
        "customer_id": int(c.customer_id[0]),
        "created_at": _cols.SAMPLE_START + timedelta(milliseconds=int(c.created_ms[0]) - _START_MS),
        "status": _cols.STATUSES[int(c.status[0])],
        "currency": "EUR",
        "total": Decimal(int(c.total_cents[0])).scaleb(-2),
        "items": items,
        "shipping_address": address,
        "coupon": _cols.COUPONS[int(c.coupon[0])],
    }


def encode_order_avro(order: dict[str, Any], *, schema_id: int = ORDER_SCHEMA_ID) -> bytes:
    """Encode one order as Confluent-framed Avro."""
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _PARSED, order)
    return encode_confluent(schema_id, buf.getvalue())


def encode_order_json(order: dict[str, Any]) -> bytes:
    """Encode one order as JSON matching :data:`ORDER_JSON_SCHEMA`.

    Decimals become their exact text (``"12.34"``) and datetimes RFC 3339 strings.
    """
    return orjson.dumps(order, default=str)


def order_key(order: dict[str, Any]) -> bytes:
    """The record key a producer would use for ``order``: the customer id as text."""
    return str(order["customer_id"]).encode()
