"""Shared by the JSON agreement tests: a schema and the batch-vs-value check."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from thalweg_bytewax.codecs.base import DecodeResult
from thalweg_bytewax.codecs.json import JsonCodec, JsonDecodeError

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id"],
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "amt": {"type": "number"},
        "ok": {"type": "boolean"},
        "ts": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "sub": {
            "type": "object",
            "properties": {"x": {"type": "integer"}, "f": {"type": "number"}},
        },
    },
}
# The same schema with a map field (record by record on the pyarrow.json engine).
WITH_MAP: dict[str, Any] = {
    **SCHEMA,
    "properties": {
        **SCHEMA["properties"],
        "m": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
}


def decode(codec: JsonCodec, payloads: list[bytes | None]) -> DecodeResult:
    res = codec.decode_batch(pa.array(payloads, pa.binary()))
    res.batch.validate(full=True)
    return res


def assert_agrees(codec: JsonCodec, payloads: list[bytes | None]) -> DecodeResult:
    """Each row of ``decode_batch`` is what ``decode_value`` gives for its payload."""
    res = decode(codec, payloads)
    failed = {e.index: e for e in res.errors}
    assert len(failed) == len(res.errors)
    rows = iter(res.batch.to_pylist(maps_as_pydicts="strict"))
    for i, p in enumerate(payloads):
        try:
            value = codec.decode_value(p)  # type: ignore[arg-type]
        except JsonDecodeError as exc:
            assert i in failed, (i, p, str(exc))
            assert (failed[i].kind, failed[i].message) == (exc.kind, str(exc)), p
        else:
            assert i not in failed, (i, p, failed[i])
            assert next(rows) == value, p
    assert next(rows, None) is None
    return res
