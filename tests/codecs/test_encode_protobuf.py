"""``ProtobufEncoder``: columnar messages that parse back to the same message.

Round trips run on the decoders' own random messages (``random_all`` over every field
kind of ``test_protobuf``, and the empty / recursive messages of ``test_protobuf_empty``):
the encoded bytes parse (upb) to a message equal to the original, and decode back to the
same batch. Confluent's ``ProtobufDeserializer`` reads what the encoder writes.
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.codecs import test_protobuf as tp
from tests.codecs import test_protobuf_empty as te
from tests.fixtures.budget import examples
from thalweg_bytewax.codecs import EncodeError, Encoder, ProtobufCodec, ProtobufEncoder
from thalweg_bytewax.codecs._proto_encode import message_indexes
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.registry import UnknownSchemaError, registry_client

ALL = f"{tp.PKG}.All"


def _encoder(message_type: str = ALL, **kw: Any) -> ProtobufEncoder:
    return ProtobufEncoder(
        descriptor_set=tp.descriptor_set(), message_type=message_type, framing="none", **kw
    )


_ALL_CODEC = tp.codec(framing="none")
_ALL_ENCODER = _encoder()


@settings(max_examples=examples(50), deadline=None)
@given(rng=st.randoms(use_true_random=False), n=st.integers(1, 6))
def test_every_field_kind_round_trips(rng: random.Random, n: int) -> None:
    msgs = [tp.random_all(rng) for _ in range(n)]
    codec = _ALL_CODEC
    batch = codec.decode_batch([m.SerializeToString() for m in msgs]).batch
    out = _ALL_ENCODER.encode_batch(batch, topic="t")
    assert [tp.All.FromString(v) for v in out.values.to_pylist()] == msgs
    assert _rows(codec.decode_batch(out.values).batch) == _rows(batch)


def _rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """Rows with ``Struct`` JSON text parsed: its key order follows the wire order of the
    map entries, which no serializer fixes (upb writes a map in hash order)."""
    rows: list[dict[str, Any]] = batch.to_pylist(maps_as_pydicts="strict")
    for row in rows:
        if row.get("meta") is not None:
            row["meta"] = json.loads(row["meta"])
    return rows


@pytest.mark.parametrize("max_depth", [3, 32])
@settings(max_examples=examples(30), deadline=None)
@given(msgs=st.lists(te.messages(), min_size=1, max_size=6))
def test_empty_and_depth_capped_messages_round_trip(max_depth: int, msgs: list[Any]) -> None:
    codec = te.codec(max_depth=max_depth)
    batch = codec.decode_batch([m.SerializeToString() for m in msgs]).batch
    enc = ProtobufEncoder(descriptor_set=te.FDS, message_type=codec.message_type, framing="none")
    out = enc.encode_batch(batch, topic="t")
    assert [te.M.FromString(v) for v in out.values.to_pylist()] == msgs
    # Map entries come back in the order upb serializes them (hash order): compare maps
    # as dicts, everything else exactly.
    again = codec.decode_batch(out.values).batch
    assert again.schema == batch.schema
    assert _rows(again) == _rows(batch)


def test_proto3_defaults_are_left_out_like_upb() -> None:
    msgs = [tp.All(), tp.All(f_int32=0, f_double=-0.0, f_string="", c_text="")]
    batch = tp.codec(framing="none").decode_batch([m.SerializeToString() for m in msgs]).batch
    out = _encoder().encode_batch(batch, topic="t").values.to_pylist()
    assert out == [m.SerializeToString() for m in msgs]


def test_confluent_deserializer_reads_payload_and_header_framing() -> None:
    url = f"mock://encode-proto-{uuid.uuid4().hex}"
    msgs = [tp.random_all(random.Random(i)) for i in range(6)]
    batch = tp.codec(framing="none").decode_batch([m.SerializeToString() for m in msgs]).batch
    deser = ProtobufDeserializer(tp.All, {"use.deprecated.format": False})
    for where in ("payload", "header"):
        enc = ProtobufEncoder(
            url, tp.descriptor_set(), message_type=ALL, auto_register=True, schema_id_in=where
        )
        assert isinstance(enc, Encoder)
        out = enc.encode_batch(batch, topic="all")
        for i, value in enumerate(out.values.to_pylist()):
            headers: list[tuple[str, str | bytes | None]] | None = (
                None if out.headers is None else [(k, v) for k, v in out.headers[i]]
            )
            assert deser(value, SerializationContext("all", MessageField.VALUE, headers)) == msgs[i]
        back = ProtobufCodec(url).decode_batch(out.values, headers=out.headers)
        assert back.errors == [] and _rows(back.batch) == _rows(batch)
    latest = ProtobufEncoder(url, message_type=ALL)
    assert latest.encode_batch(batch, topic="all").values.equals(
        ProtobufEncoder(url, tp.descriptor_set(), message_type=ALL)
        .encode_batch(batch, topic="all")
        .values
    )
    reg = registry_client(url).get_latest_version("all-value")
    assert reg.schema.schema_type == "PROTOBUF"


def test_message_indexes_of_nested_types() -> None:
    enc = _encoder(f"{tp.PKG}.Outer.Inner")
    out = enc.encode_batch(pa.record_batch({"x": pa.array([5], pa.int32()), "y": ["q"]}), topic="t")
    assert tp.Inner.FromString(out.values[0].as_py()) == tp.Inner(x=5, y="q")
    desc = enc._desc  # noqa: SLF001 - the resolved descriptor
    assert desc is not None and message_indexes(desc) == [1, 0]
    assert desc.containing_type is not None
    assert message_indexes(desc.containing_type) == [1]


def test_bad_values_name_column_and_row() -> None:
    enc = _encoder(f"{tp.PKG}.Outer.Inner")
    with pytest.raises(EncodeError, match="column `x` row 1: expected a value of `int32`") as info:
        enc.encode_batch(pa.record_batch({"x": pa.array([1, 2**40]), "y": ["a", "b"]}), topic="t")
    assert (info.value.column, info.value.row) == ("x", 1)
    with pytest.raises(EncodeError, match="column `x` row 0: expected a value .*no presence"):
        enc.encode_batch(pa.record_batch({"x": pa.array([None, 1], pa.int32())}), topic="t")
    with pytest.raises(
        EncodeError, match="has column `z` the message `twg.test.Outer.Inner` lacks"
    ):
        enc.encode_batch(pa.record_batch({"z": [1]}), topic="t")
    all_enc = _encoder()
    batch = tp.codec(framing="none").decode_batch([tp.All().SerializeToString()] * 2).batch
    bad_color = batch.set_column(
        batch.schema.get_field_index("color"), "color", pa.array(["RED", "PURPLE"])
    )
    with pytest.raises(
        EncodeError,
        match="column `color` row 1: expected a symbol of enum `twg.test.Color`; got 'PURPLE'",
    ):
        all_enc.encode_batch(bad_color, topic="t")
    two = batch.set_column(batch.schema.get_field_index("c_text"), "c_text", pa.array(["a", None]))
    two = two.set_column(
        two.schema.get_field_index("c_num"), "c_num", pa.array([1, None], pa.int64())
    )
    with pytest.raises(EncodeError, match="row 0: oneof `choice` has more than one member set"):
        all_enc.encode_batch(two, topic="t")


def test_registry_errors_and_config() -> None:
    url = f"mock://encode-proto-{uuid.uuid4().hex}"
    batch = pa.record_batch({"x": pa.array([1], pa.int32()), "y": ["a"]})
    enc = ProtobufEncoder(url, tp.descriptor_set(), message_type=f"{tp.PKG}.Outer.Inner")
    with pytest.raises(UnknownSchemaError, match="auto_register=True"):
        enc.encode_batch(batch, topic="t")
    with pytest.raises(ConfigError, match="is not in the descriptor set"):
        ProtobufEncoder(url, tp.descriptor_set(), message_type="nope.X")
    with pytest.raises(ConfigError, match="framing 'none' needs descriptor_set"):
        ProtobufEncoder(framing="none")


def test_the_codec_and_the_encoder_find_a_message_type_alike() -> None:
    # One lookup: the same default message, the same refusal of an unknown name.
    enc = ProtobufEncoder(descriptor_set=tp.descriptor_set(), framing="none")
    codec = ProtobufCodec(descriptor_set=tp.descriptor_set(), framing="none")
    assert enc._desc is not None  # noqa: SLF001 - the message the encoder writes
    assert codec.arrow_schema.names == [f.name for f in enc._desc.fields]  # noqa: SLF001
    with pytest.raises(ConfigError) as by_encoder:
        ProtobufEncoder(descriptor_set=tp.descriptor_set(), message_type="nope.X", framing="none")
    with pytest.raises(ConfigError) as by_codec:
        ProtobufCodec(descriptor_set=tp.descriptor_set(), message_type="nope.X")
    said = str(by_codec.value).removeprefix("protobuf codec")
    assert said == str(by_encoder.value).removeprefix("protobuf encoder")
    assert "expected a fully qualified name, e.g. `package.Message`" in said
