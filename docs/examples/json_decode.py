"""Decode JSON payloads columnar, the way `twg.decode` does for each batch.

Run: python docs/examples/json_decode.py
"""

from thalweg_bytewax.codecs import JsonCodec

SCHEMA = {
    "type": "object",
    "required": ["order_id", "total"],
    "properties": {
        "order_id": {"type": "string"},
        "total": {"type": "number"},
        "created_at": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}

codec = JsonCodec(SCHEMA)  # engine="auto": the native reader when it was built
result = codec.decode_batch(
    [
        b'{"order_id": "a-1", "total": 12.5, "created_at": "2026-01-01T10:00:00+01:00"}',
        b'{"order_id": "a-2", "total": "12.5"}',  # a string where a number belongs
        b'{"order_id": "a-3", "total": 7, "tags": ["new"]}',
        b'{"order_id": "a-4", "total": 1, "total": 2}',  # repeated key: the last one wins
        b'{"order_id": "a-5"',  # cut short
    ]
)
print(result.batch.select(["order_id", "total", "tags"]).to_pylist())
for failure in result.errors:
    print(failure.index, failure.kind.value, failure.message)
