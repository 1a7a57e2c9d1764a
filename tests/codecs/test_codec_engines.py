"""One spelling for a codec's columnar reader: ``engine=`` with named engines.

``AvroCodec(engine="auto"|"polars"|"fastavro")`` and
``JsonCodec(engine="auto"|"native"|"pyarrow")``; every engine decodes alike, and an
unknown engine or framing is a ``ConfigError`` that lists the valid values.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from thalweg_bytewax.codecs import AvroCodec, JsonCodec, ProtobufCodec
from thalweg_bytewax.dev.samples import ORDER_AVRO_SCHEMA, encode_order_avro, sample_orders
from thalweg_bytewax.errors import ConfigError, MissingDependencyError

JSON_SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}}


@pytest.fixture
def schema_dir(tmp_path: Path) -> Path:
    (tmp_path / "1.avsc").write_text(json.dumps(ORDER_AVRO_SCHEMA))
    return tmp_path


@pytest.mark.parametrize("engine", ["auto", "polars", "fastavro"])
def test_every_avro_engine_decodes_alike(schema_dir: Path, engine: str) -> None:
    payloads = [encode_order_avro(o) for o in sample_orders(50)]
    payloads.insert(7, b"\x00\x00\x00\x00\x01\xff")  # a body cut short
    reference = AvroCodec(schema_dir, engine="fastavro").decode_batch(payloads)
    result = AvroCodec(schema_dir, engine=engine).decode_batch(payloads)  # type: ignore[arg-type]
    assert result.batch.equals(reference.batch)
    assert result.errors == reference.errors
    assert [e.index for e in result.errors] == [7]


def test_the_fastavro_engine_never_takes_the_polars_path(schema_dir: Path) -> None:
    codecs = {e: AvroCodec(schema_dir, engine=e) for e in ("auto", "polars", "fastavro")}
    for codec in codecs.values():
        codec.decode_batch([encode_order_avro(next(sample_orders(1)))])
    assert codecs["auto"]._schemas.writers[1].fast and codecs["polars"]._schemas.writers[1].fast
    assert not codecs["fastavro"]._schemas.writers[1].fast


def test_the_polars_engine_requires_polars(
    schema_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What an environment without it sees (polars is a dependency: the plain install has it).
    monkeypatch.setitem(sys.modules, "polars", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "thalweg-bytewax"'):
        AvroCodec(schema_dir, engine="polars")
    AvroCodec(schema_dir, engine="auto")
    AvroCodec(schema_dir, engine="fastavro")


@pytest.mark.parametrize("engine", ["fast", "Polars", "", None, True])
def test_an_unknown_avro_engine_lists_the_valid_ones(schema_dir: Path, engine: object) -> None:
    expected = (
        r"^avro codec: expected engine `auto`, `polars` or `fastavro`; got "
        + repr(engine).replace("(", r"\(")
        + "$"
    )
    with pytest.raises(ConfigError, match=expected):
        AvroCodec(schema_dir, engine=engine)  # type: ignore[arg-type]


@pytest.mark.parametrize("engine", ["fast", "arrow", None])
def test_an_unknown_json_engine_lists_the_valid_ones(engine: object) -> None:
    with pytest.raises(
        ConfigError, match=r"^json codec: expected engine `auto`, `native` or `pyarrow`; got "
    ):
        JsonCodec(JSON_SCHEMA, engine=engine)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "make",
    [
        lambda d: AvroCodec(d, framing="conflunt"),
        lambda d: JsonCodec(JSON_SCHEMA, framing="conflunt"),
        lambda d: ProtobufCodec(d, framing="conflunt"),
    ],
    ids=["avro", "json", "protobuf"],
)
def test_an_unknown_framing_lists_the_valid_ones(schema_dir: Path, make: object) -> None:
    with pytest.raises(
        ConfigError, match=r"codec: expected framing `confluent` or `none`; got 'conflunt'$"
    ):
        make(schema_dir)  # type: ignore[operator]
