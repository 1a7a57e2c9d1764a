"""Protobuf bad data: every defect is a per-row failure, never a silent value."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, struct_pb2, timestamp_pb2
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

from thalweg_bytewax.codecs import FailureKind
from thalweg_bytewax.codecs.protobuf import ProtobufCodec, ProtobufDecodeError


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        if not n:
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def fv(num: int, v: int) -> bytes:
    return varint(num << 3) + varint(v)


def fb(num: int, b: bytes) -> bytes:
    return varint(num << 3 | 2) + varint(len(b)) + b


def make_fds(syntax: str = "proto2") -> descriptor_pb2.FileDescriptorSet:
    fds = descriptor_pb2.FileDescriptorSet()
    fds.file.append(
        descriptor_pb2.FileDescriptorProto.FromString(timestamp_pb2.DESCRIPTOR.serialized_pb)
    )
    f = fds.file.add(name="t.proto", package="t", syntax=syntax)
    f.dependency.append("google/protobuf/timestamp.proto")
    e = f.enum_type.add(name="Color")
    e.value.add(name="RED", number=0)
    e.value.add(name="GREEN", number=1)
    m = f.message_type.add(name="M")
    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    name_label = F.LABEL_REQUIRED if syntax == "proto2" else opt
    m.field.add(name="id", number=1, type=F.TYPE_INT32, label=opt)
    m.field.add(name="color", number=2, type=F.TYPE_ENUM, label=opt, type_name=".t.Color")
    m.field.add(name="colors", number=3, type=F.TYPE_ENUM, label=rep, type_name=".t.Color")
    m.field.add(name="name", number=4, type=F.TYPE_STRING, label=name_label)
    ts = ".google.protobuf.Timestamp"
    m.field.add(name="ts", number=5, type=F.TYPE_MESSAGE, label=opt, type_name=ts)
    return fds


def codec(syntax: str = "proto2") -> ProtobufCodec:
    return ProtobufCodec(descriptor_set=make_fds(syntax), message_type="t.M", framing="none")


def assert_one_bad(c: ProtobufCodec, good: bytes, bad: bytes, kind: FailureKind, text: str) -> Any:
    """``bad`` fails alone in both paths; the good rows around it survive."""
    res = c.decode_batch([good, bad, good])
    assert [e.index for e in res.errors] == [1], res.errors
    assert res.errors[0].kind is kind
    assert text in res.errors[0].message, res.errors[0].message
    assert res.batch.num_rows == 2
    with pytest.raises(ProtobufDecodeError) as info:
        c.decode_value(bad)
    assert info.value.kind is kind
    assert text in str(info.value)
    return res


def test_struct_value_holding_infinity_fails_that_row_only() -> None:
    fds = descriptor_pb2.FileDescriptorSet()
    fds.file.append(
        descriptor_pb2.FileDescriptorProto.FromString(struct_pb2.DESCRIPTOR.serialized_pb)
    )
    f = fds.file.add(name="s.proto", package="s", syntax="proto3")
    f.dependency.append("google/protobuf/struct.proto")
    m = f.message_type.add(name="M")
    m.field.add(name="id", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    m.field.add(
        name="v",
        number=2,
        type=F.TYPE_MESSAGE,
        label=F.LABEL_OPTIONAL,
        type_name=".google.protobuf.Value",
    )
    c = ProtobufCodec(descriptor_set=fds, message_type="s.M", framing="none")
    for x in (float("inf"), float("nan")):
        val = b"\x11" + struct.pack("<d", x)
        res = assert_one_bad(c, fv(1, 1), fv(1, 2) + fb(2, val), FailureKind.MALFORMED, "`v`")
        assert res.batch.column("id").to_pylist() == [1, 1]


def test_proto2_string_with_invalid_utf8_fails_that_row_only() -> None:
    good = fv(1, 1) + fb(4, b"ok")
    bad = fv(1, 3) + fb(4, b"\xff\xfe")
    res = assert_one_bad(codec(), good, bad, FailureKind.MALFORMED, "`name` is not valid UTF-8")
    assert res.batch.column("name").to_pylist() == ["ok", "ok"]


def test_proto2_missing_required_field_fails_that_row_only() -> None:
    good = fv(1, 1) + fb(4, b"ok")
    bad = fv(1, 2)  # `name` (required) absent
    assert_one_bad(codec(), good, bad, FailureKind.MALFORMED, "missing required field(s): name")
    assert codec("proto3").decode_value(bad)["name"] == ""  # proto3: absent is the default


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (fv(1, 5) + fv(2, 7) + fb(4, b"abc"), "`color` (number 2)"),
        (fv(1, 5) + fv(3, 1) + fv(3, 9) + fv(3, 0) + fb(4, b"abc"), "`colors` (number 3)"),
        (fv(1, 5) + fb(4, b"abc") + fb(1, b"x"), "`id` (number 1)"),  # wrong wire type
    ],
)
def test_proto2_value_the_reader_cannot_hold_fails_that_row(bad: bytes, field: str) -> None:
    assert_one_bad(codec(), fv(1, 1) + fb(4, b"ok"), bad, FailureKind.MALFORMED, field)


def test_registry_evolution_type_change_and_missing_required_fail_per_row(
    tmp_path: Any,
) -> None:
    from thalweg_bytewax.codecs.framing import encode_confluent

    (tmp_path / "1.pb").write_bytes(make_fds().SerializeToString())
    v2 = make_fds()
    v2.file[1].message_type[0].field[0].type = F.TYPE_STRING  # id: int32 -> string
    (tmp_path / "2.pb").write_bytes(v2.SerializeToString())
    c = ProtobufCodec(registry=str(tmp_path))

    def fr(schema_id: int, body: bytes) -> bytes:
        return encode_confluent(schema_id, body, message_indexes=[0])

    new = fr(2, fb(1, b"s") + fb(4, b"b"))
    old_ok = fr(1, fv(1, 43) + fb(4, b"a"))
    old_missing = fr(1, fv(1, 42))
    res = c.decode_batch([new, old_ok, old_missing, new])
    assert [(e.index, e.kind) for e in res.errors] == [
        (1, FailureKind.SCHEMA_MISMATCH),
        (2, FailureKind.MALFORMED),
    ]
    assert "`id` (number 1)" in res.errors[0].message
    assert "missing required field(s): name" in res.errors[1].message
    assert res.batch.to_pylist()[0]["id"] == "s" and res.batch.num_rows == 2
    with pytest.raises(ProtobufDecodeError) as info:
        c.decode_value(old_ok)
    assert info.value.kind is FailureKind.SCHEMA_MISMATCH
