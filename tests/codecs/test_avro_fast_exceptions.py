"""The Avro fast path falls back on errors and polars panics, never on interrupts."""

from __future__ import annotations

import json
import uuid
from typing import Any

import polars
import pyarrow as pa
import pytest
from polars.exceptions import PanicException

from thalweg_bytewax.codecs import _avro_fast
from thalweg_bytewax.codecs.avro import AvroCodec
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.registry import registry_client

SCHEMA = {
    "type": "record",
    "name": "Row",
    "namespace": "twg.fast",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}


def _codec_and_payloads() -> tuple[AvroCodec, list[bytes]]:
    from confluent_kafka.schema_registry import Schema  # noqa: PLC0415

    url = f"mock://fast-{uuid.uuid4()}"
    sid = registry_client(url).register_schema("rows-value", Schema(json.dumps(SCHEMA)))
    # id=k zigzag-encoded as one byte, then a one-character string.
    bodies = [bytes([2 * k, 2]) + b"x" for k in range(5)]
    return AvroCodec(url), [encode_confluent(sid, b) for b in bodies]


def _raising(exc: BaseException) -> Any:
    def read_avro(*_args: object, **_kwargs: object) -> Any:
        raise exc

    return read_avro


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3), MemoryError()])
def test_interrupts_and_memory_errors_propagate(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    codec, payloads = _codec_and_payloads()
    monkeypatch.setattr(polars, "read_avro", _raising(exc))
    with pytest.raises(type(exc)):
        codec.decode_batch(payloads)


@pytest.mark.parametrize("exc", [PanicException("boom"), ValueError("bad block")])
def test_errors_and_polars_panics_fall_back_to_the_exact_path(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    codec, payloads = _codec_and_payloads()
    monkeypatch.setattr(polars, "read_avro", _raising(exc))
    result = codec.decode_batch(payloads)
    assert result.errors == []
    assert result.batch.to_pylist() == [{"id": k, "name": "x"} for k in range(5)]


def test_fast_path_is_taken_without_the_patch() -> None:
    codec, payloads = _codec_and_payloads()
    node = codec._schemas.get(int.from_bytes(payloads[0][1:5], "big")).node
    assert _avro_fast.supported(node)
    header = _avro_fast.ocf_header(_avro_fast.ocf_schema_json(SCHEMA, {}))
    bodies = pa.array([p[5:] for p in payloads], pa.binary())
    assert _avro_fast.decode_block(header, node, bodies) is not None
