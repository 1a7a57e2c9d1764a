"""The two record shapes of ``decode_e2e.py``: the sample orders and a plain order.

The plain order has no logical types: strings, a double, a long and an array of one to
three line records, so every reader maps it to Arrow without conversions.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["PLAIN_AVRO_SCHEMA", "PLAIN_JSON_SCHEMA", "PLAIN_SCHEMA_ID", "SHAPES", "Shape", "shape"]

PLAIN_SCHEMA_ID = 7
"""The Confluent schema id plain orders are framed with."""

PLAIN_AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "PlainOrder",
    "namespace": "thalweg.bench",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "customer", "type": "string"},
        {"name": "currency", "type": "string"},
        {"name": "total", "type": "double"},
        {"name": "created_ms", "type": "long"},
        {
            "name": "lines",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Line",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "quantity", "type": "long"},
                        {"name": "price", "type": "double"},
                    ],
                },
            },
        },
    ],
}
"""The plain order's Avro schema."""

_LINE = {
    "type": "object",
    "properties": {
        "sku": {"type": "string"},
        "quantity": {"type": "integer"},
        "price": {"type": "number"},
    },
    "required": ["sku", "quantity", "price"],
}
PLAIN_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "customer": {"type": "string"},
        "currency": {"type": "string"},
        "total": {"type": "number"},
        "created_ms": {"type": "integer"},
        "lines": {"type": "array", "items": _LINE},
    },
    "required": ["order_id", "customer", "currency", "total", "created_ms", "lines"],
}
"""The plain order as JSON Schema."""


def plain_orders(n: int, *, seed: int = 7) -> Iterator[dict[str, Any]]:
    """``n`` deterministic plain orders for ``seed``."""
    rng = random.Random(seed)  # noqa: S311 - sample data, not security
    for _ in range(n):
        lines = [
            {
                "sku": f"SKU-{rng.randrange(10_000):05d}",
                "quantity": rng.randrange(1, 10),
                "price": round(rng.uniform(1, 500), 2),
            }
            for _ in range(rng.randrange(1, 4))
        ]
        yield {
            "order_id": f"{rng.getrandbits(64):016x}",
            "customer": f"customer-{rng.randrange(100_000)}",
            "currency": rng.choice(["EUR", "USD", "GBP"]),
            "total": round(sum(x["quantity"] * x["price"] for x in lines), 2),
            "created_ms": 1_700_000_000_000 + rng.randrange(10**9),
            "lines": lines,
        }


@dataclass(frozen=True)
class Shape:
    """One record shape: its schemas, generator and encoders."""

    name: str
    avro_schema: dict[str, Any]
    schema_id: int
    json_schema: dict[str, Any]

    def orders(self, n: int, seed: int) -> Iterator[dict[str, Any]]:
        """``n`` records of this shape."""
        if self.name == "plain":
            return plain_orders(n, seed=seed)
        from thalweg_bytewax.dev.samples import sample_orders

        return sample_orders(n, seed=seed)

    def key(self, order: dict[str, Any]) -> bytes:
        """The record key: the customer."""
        return str(order.get("customer_id", order.get("customer"))).encode()

    def encode(self, order: dict[str, Any], fmt: str) -> bytes:
        """Confluent-framed Avro, or JSON (decimals as text, datetimes as ISO 8601)."""
        import orjson

        if fmt == "json":
            return orjson.dumps(order, default=str)
        import io

        import fastavro

        from thalweg_bytewax.codecs.framing import encode_confluent

        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, _parsed(self.name), order)
        return encode_confluent(self.schema_id, buf.getvalue())

    def arrow_schema(self, fmt: str) -> Any:
        """The Arrow schema a competent user declares: from decoded sample records."""
        import orjson
        import pyarrow as pa

        rows = []
        for order in self.orders(50, seed=99):
            if fmt == "json":  # decimals and datetimes arrive as strings
                rows.append(orjson.loads(orjson.dumps(order, default=str)))
            else:
                row = dict(order)
                if "order_id" in row and not isinstance(row["order_id"], str):
                    row["order_id"] = str(row["order_id"])  # uuid.UUID
                rows.append(row)
        return pa.Table.from_pylist(rows).schema


_PARSED: dict[str, Any] = {}


def _parsed(name: str) -> Any:
    import fastavro

    if name not in _PARSED:
        _PARSED[name] = fastavro.parse_schema(shape(name).avro_schema)
    return _PARSED[name]


SHAPES = ("plain", "sample")
"""The shape names."""


def shape(name: str) -> Shape:
    """The shape called ``name`` (the sample one imports thalweg only when asked for)."""
    if name == "plain":
        return Shape("plain", PLAIN_AVRO_SCHEMA, PLAIN_SCHEMA_ID, PLAIN_JSON_SCHEMA)
    from thalweg_bytewax.dev.samples import ORDER_AVRO_SCHEMA, ORDER_JSON_SCHEMA, ORDER_SCHEMA_ID

    return Shape("sample", ORDER_AVRO_SCHEMA, ORDER_SCHEMA_ID, ORDER_JSON_SCHEMA)
