"""Deterministic sample orders: the data of the embedded default flow and the benchmarks.

Orders are generated from a seed, so every run (and every process of a multi-process
run) sees the same records. They are encoded exactly as a real topic would carry them:
Confluent-framed Avro (magic byte 0, the schema id, the Avro body).
"""

from __future__ import annotations

import io
import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import fastavro
import orjson

from thalweg_bytewax.codecs.framing import encode_confluent

__all__ = [
    "ORDER_AVRO_SCHEMA",
    "ORDER_JSON_SCHEMA",
    "ORDER_SCHEMA_ID",
    "encode_order_avro",
    "encode_order_json",
    "order_key",
    "sample_order",
    "sample_orders",
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
