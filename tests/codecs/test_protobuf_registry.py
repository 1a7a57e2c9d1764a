"""ProtobufCodec over a schema registry (mock://), against confluent-kafka's own serdes.

confluent-kafka's ``ProtobufSerializer`` / ``ProtobufDeserializer`` accept any message
class with a ``DESCRIPTOR``, so classes built by ``GetMessageClass`` from a private pool
work: the serializer registers the schema (and its references), the deserializer is the
reference decoder.
"""

from __future__ import annotations

import uuid
from datetime import UTC
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from thalweg_bytewax.codecs import FailureKind
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.codecs.protobuf import ProtobufCodec
from thalweg_bytewax.registry import registry_client

F = descriptor_pb2.FieldDescriptorProto


def _files() -> list[descriptor_pb2.FileDescriptorProto]:
    dep = descriptor_pb2.FileDescriptorProto(
        name="twg/dep.proto", package="twg.dep", syntax="proto3"
    )
    money = dep.message_type.add(name="Money")
    money.field.extend(
        [
            F(name="currency", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL),
            F(name="units", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL),
        ]
    )
    main = descriptor_pb2.FileDescriptorProto(
        name="twg/main.proto",
        package="twg.main",
        syntax="proto3",
        dependency=["twg/dep.proto", "google/protobuf/timestamp.proto"],
    )
    main.message_type.add(name="Header").field.append(
        F(name="h", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    )
    pay = main.message_type.add(name="Envelope")
    line = pay.nested_type.add(name="Line")
    line.field.extend(
        [
            F(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL),
            F(name="price", number=2, type=F.TYPE_MESSAGE, type_name=".twg.dep.Money", label=F.LABEL_OPTIONAL),
            F(name="at", number=3, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp", label=F.LABEL_OPTIONAL),
        ]
    )  # fmt: skip
    pay.field.append(F(name="id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL))
    return [dep, main]


_POOL = descriptor_pool.DescriptorPool()
_POOL.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
for _f in _files():
    _POOL.Add(_f)
# Classes built at run time: their fields are not known statically.
Line: Any = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("twg.main.Envelope.Line"))
Header: Any = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("twg.main.Header"))


@pytest.fixture
def client() -> Any:
    return registry_client(f"mock://twg-proto-{uuid.uuid4().hex}")


def _serialize(client: Any, msg: Any, topic: str = "orders") -> bytes:
    # Calling confluent-kafka's serializer class gives Any under mypy: name the type.
    ser: ProtobufSerializer = ProtobufSerializer(
        type(msg), client, {"use.deprecated.format": False}
    )
    payload = ser(msg, SerializationContext(topic, MessageField.VALUE))
    assert payload is not None
    return payload


def test_nested_non_first_type_with_references_matches_confluent_deserializer(client: Any) -> None:
    msgs = []
    for i in range(50):
        m: Any = Line(sku=f"s{i}")  # a message class built at run time: fields not static
        if i % 3:
            m.price.currency, m.price.units = "EUR", i * 100
        if i % 2:
            m.at.seconds, m.at.nanos = 1_700_000_000 + i, i * 1000
        msgs.append(m)
    payloads = [_serialize(client, m) for m in msgs]
    assert payloads[0][5:8] == b"\x04\x02\x00"  # message indexes [1, 0]: nested, non-first
    codec = ProtobufCodec(registry=client)
    res = codec.decode_batch(pa.array(payloads))
    assert res.errors == []
    money = pa.struct(
        [pa.field("currency", pa.string(), False), pa.field("units", pa.int64(), False)]
    )
    assert codec.arrow_schema.equals(
        pa.schema(
            [
                pa.field("sku", pa.string(), False),
                pa.field("price", money),
                pa.field("at", pa.timestamp("us", tz="UTC")),
            ]
        )
    )
    deser = ProtobufDeserializer(Line, {"use.deprecated.format": False}, client)
    ctx = SerializationContext("orders", MessageField.VALUE)
    for p, row in zip(payloads, res.batch.to_pylist(), strict=True):
        ref = deser(p, ctx)
        assert row == {
            "sku": ref.sku,
            "price": (
                {"currency": ref.price.currency, "units": ref.price.units}
                if ref.HasField("price")
                else None
            ),
            "at": ref.at.ToDatetime(tzinfo=UTC) if ref.HasField("at") else None,
        }
        assert codec.decode_value(p) == row


def test_unknown_schema_id_and_other_type_fail_per_row(client: Any) -> None:
    good = _serialize(client, Line(sku="a"))
    codec = ProtobufCodec(registry=client, message_type="twg.main.Envelope.Line")
    unknown = encode_confluent(9999, Line(sku="b").SerializeToString(), message_indexes=[1, 0])
    other = _serialize(client, Header(h="x"), topic="headers")
    res = codec.decode_batch([good, unknown, other, good])
    assert res.batch.num_rows == 2
    kinds = {e.index: e.kind for e in res.errors}
    assert kinds == {1: FailureKind.UNKNOWN_SCHEMA, 2: FailureKind.SCHEMA_MISMATCH}
    assert "9999" in res.errors[0].message
    assert "`twg.main.Header`" in res.errors[1].message


def test_registry_codec_needs_a_payload_before_the_schema_is_known(client: Any) -> None:
    from thalweg_bytewax.errors import SchemaError

    codec = ProtobufCodec(registry=client)
    with pytest.raises(SchemaError, match="decode one first"):
        _ = codec.arrow_schema
    _ = codec.decode_value(_serialize(client, Header(h="x"), topic="h"))
    assert codec.arrow_schema.names == ["h"]
