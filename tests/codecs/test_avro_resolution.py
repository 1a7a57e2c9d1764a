"""Writer-to-output resolution edge cases: promotion, framing, unions, fast-path checks."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest

from thalweg_bytewax.codecs import FailureKind
from thalweg_bytewax.codecs.avro import AvroCodec
from thalweg_bytewax.codecs.framing import encode_confluent


def _dir(tmp_path: Path, schemas: dict[int, dict[str, Any]]) -> Path:
    for key, schema in schemas.items():
        (tmp_path / f"{key}.avsc").write_text(json.dumps(schema))
    return tmp_path


def _body(schema: dict[str, Any], rec: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), rec)
    return buf.getvalue()


def _framed(sid: int, schema: dict[str, Any], rec: dict[str, Any]) -> bytes:
    return encode_confluent(sid, _body(schema, rec))


def _record(*fields: tuple[str, Any], name: str = "R") -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}


@pytest.mark.parametrize("fast", [True, False], ids=["fast-on", "fast-off"])
def test_promotion_without_reader_converts_numbers_and_rejects_bad_utf8(
    tmp_path: Path, fast: bool
) -> None:
    old = _record(("a", "int"), ("b", "bytes"), ("c", "long"))
    new = _record(("a", "float"), ("b", "string"), ("c", "double"))
    codec = AvroCodec(_dir(tmp_path, {1: old, 2: new}), fast=fast)
    big = 2**53 + 1
    result = codec.decode_batch(
        [
            _framed(2, new, {"a": 1.5, "b": "x", "c": 0.5}),
            _framed(1, old, {"a": 2**24 + 1, "b": b"ok", "c": big}),
            _framed(1, old, {"a": 2, "b": b"\xff\xfe", "c": 1}),
            _framed(1, old, {"a": 3, "b": b"fine", "c": 2}),
        ]
    )
    assert [(e.index, e.kind) for e in result.errors] == [(2, FailureKind.MALFORMED)]
    assert "`b`" in result.errors[0].message and "UTF-8" in result.errors[0].message
    assert result.batch.to_pylist() == [
        {"a": 1.5, "b": "x", "c": 0.5},
        {"a": float(2**24), "b": "ok", "c": float(big)},  # nearest float32 / float64
        {"a": 3.0, "b": "fine", "c": 2.0},
    ]
