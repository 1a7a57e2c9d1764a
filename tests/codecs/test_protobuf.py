"""ProtobufCodec: type mapping, message-index framing, differential and bad-input tests.

Test schemas are built as FileDescriptorProto objects at test time (no protoc needed).
"""

from __future__ import annotations

import gc
import json
import logging
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    json_format,
    message_factory,
    struct_pb2,
    timestamp_pb2,
    wrappers_pb2,
)

from thalweg_bytewax.codecs import FailureKind
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.codecs.protobuf import ProtobufCodec, ProtobufDecodeError

F = descriptor_pb2.FieldDescriptorProto
PKG = "twg.test"
REP = F.LABEL_REPEATED


def fld(name: str, num: int, t: int, type_name: str | None = None, **kw: Any) -> F:
    f = F(name=name, number=num, type=t, label=kw.pop("label", F.LABEL_OPTIONAL))  # type: ignore[arg-type]
    if type_name:
        f.type_name = type_name if type_name.startswith(".") else f".{PKG}.{type_name}"
    for k, v in kw.items():
        setattr(f, k, v)
    return f


def map_entry(msg: descriptor_pb2.DescriptorProto, name: str, key: F, value: F) -> None:
    e = msg.nested_type.add(name=name)
    e.options.map_entry = True
    key.name, key.number, value.name, value.number = "key", 1, "value", 2
    e.field.extend([key, value])


def all_file() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(
        name="twg/test/all.proto",
        package=PKG,
        syntax="proto3",
        dependency=[
            "google/protobuf/timestamp.proto",
            "google/protobuf/duration.proto",
            "google/protobuf/wrappers.proto",
            "google/protobuf/struct.proto",
        ],
    )
    color = fdp.enum_type.add(name="Color")
    for i, n in enumerate(["COLOR_UNSPECIFIED", "RED", "GREEN"]):
        color.value.add(name=n, number=i)
    fdp.message_type.add(name="First").field.append(fld("a", 1, F.TYPE_STRING))  # [0]
    outer = fdp.message_type.add(name="Outer")  # [1]
    inner = outer.nested_type.add(name="Inner")  # [1, 0]
    inner.field.extend([fld("x", 1, F.TYPE_INT32), fld("y", 2, F.TYPE_STRING)])
    outer.field.append(fld("inner", 1, F.TYPE_MESSAGE, "Outer.Inner"))
    a = fdp.message_type.add(name="All")  # [2]
    scalars = [
        ("f_double", F.TYPE_DOUBLE), ("f_float", F.TYPE_FLOAT), ("f_int64", F.TYPE_INT64),
        ("f_uint64", F.TYPE_UINT64), ("f_int32", F.TYPE_INT32), ("f_fixed64", F.TYPE_FIXED64),
        ("f_fixed32", F.TYPE_FIXED32), ("f_bool", F.TYPE_BOOL), ("f_string", F.TYPE_STRING),
        ("f_bytes", F.TYPE_BYTES), ("f_uint32", F.TYPE_UINT32), ("f_sfixed32", F.TYPE_SFIXED32),
        ("f_sfixed64", F.TYPE_SFIXED64), ("f_sint32", F.TYPE_SINT32), ("f_sint64", F.TYPE_SINT64),
    ]  # fmt: skip
    for i, (n, t) in enumerate(scalars, start=1):
        a.field.append(fld(n, i, t))
    map_entry(a, "CountsEntry", fld("", 0, F.TYPE_STRING), fld("", 0, F.TYPE_INT64))
    map_entry(a, "ByIdEntry", fld("", 0, F.TYPE_INT32), fld("", 0, F.TYPE_MESSAGE, "Outer.Inner"))
    a.oneof_decl.add(name="choice")
    a.oneof_decl.add(name="_opt")
    wkt = ".google.protobuf."
    a.field.extend(
        [
            fld("color", 16, F.TYPE_ENUM, "Color"),
            fld("counts", 17, F.TYPE_MESSAGE, "All.CountsEntry", label=REP),
            fld("by_id", 18, F.TYPE_MESSAGE, "All.ByIdEntry", label=REP),
            fld("nums", 19, F.TYPE_INT32, label=REP),
            fld("inners", 20, F.TYPE_MESSAGE, "Outer.Inner", label=REP),
            fld("c_text", 21, F.TYPE_STRING, oneof_index=0),
            fld("c_num", 22, F.TYPE_INT64, oneof_index=0),
            fld("c_inner", 23, F.TYPE_MESSAGE, "Outer.Inner", oneof_index=0),
            fld("w_int64", 24, F.TYPE_MESSAGE, wkt + "Int64Value"),
            fld("w_string", 25, F.TYPE_MESSAGE, wkt + "StringValue"),
            fld("w_bool", 26, F.TYPE_MESSAGE, wkt + "BoolValue"),
            fld("w_double", 27, F.TYPE_MESSAGE, wkt + "DoubleValue"),
            fld("w_bytes", 28, F.TYPE_MESSAGE, wkt + "BytesValue"),
            fld("ts", 29, F.TYPE_MESSAGE, wkt + "Timestamp"),
            fld("dur", 30, F.TYPE_MESSAGE, wkt + "Duration"),
            fld("opt", 31, F.TYPE_INT32, oneof_index=1, proto3_optional=True),
            fld("sub", 32, F.TYPE_MESSAGE, "Outer.Inner"),
            fld("colors", 33, F.TYPE_ENUM, "Color", label=REP),
            fld("stamps", 34, F.TYPE_MESSAGE, wkt + "Timestamp", label=REP),
            fld("meta", 35, F.TYPE_MESSAGE, wkt + "Struct"),
        ]
    )
    node = fdp.message_type.add(name="Node")  # [3] recursive
    node.field.extend([fld("name", 1, F.TYPE_STRING), fld("child", 2, F.TYPE_MESSAGE, "Node")])
    res = fdp.message_type.add(name="Reserved")  # [4]
    res.field.extend([fld("_twg_offset", 1, F.TYPE_STRING), fld("ok", 2, F.TYPE_STRING)])
    return fdp


def descriptor_set() -> bytes:
    fds = descriptor_pb2.FileDescriptorSet()
    for mod in (timestamp_pb2, duration_pb2, wrappers_pb2, struct_pb2):
        p = descriptor_pb2.FileDescriptorProto()
        mod.DESCRIPTOR.CopyToProto(p)
        fds.file.append(p)
    fds.file.append(all_file())
    return fds.SerializeToString()


_POOL = descriptor_pool.DescriptorPool()
for _f in descriptor_pb2.FileDescriptorSet.FromString(descriptor_set()).file:
    _POOL.Add(_f)


def cls(name: str) -> Any:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PKG}.{name}"))


All, Inner, Node, First = cls("All"), cls("Outer.Inner"), cls("Node"), cls("First")
COLORS = ["COLOR_UNSPECIFIED", "RED", "GREEN"]


def codec(message_type: str = "All", **kw: Any) -> ProtobufCodec:
    return ProtobufCodec(
        descriptor_set=descriptor_set(), message_type=f"{PKG}.{message_type}", **kw
    )


def frame(msg: Any, indexes: list[int] = [2]) -> bytes:  # noqa: B006
    return encode_confluent(42, msg.SerializeToString(), message_indexes=indexes)


def random_all(rng: random.Random) -> Any:
    m = All()
    if rng.random() < 0.8:
        m.f_double, m.f_float = rng.uniform(-1e9, 1e9), rng.uniform(-1e3, 1e3)
        m.f_int64, m.f_uint64 = rng.randint(-(2**63), 2**63 - 1), rng.randint(0, 2**64 - 1)
        m.f_int32, m.f_fixed64 = rng.randint(-(2**31), 2**31 - 1), rng.randint(0, 2**64 - 1)
        m.f_fixed32, m.f_bool = rng.randint(0, 2**32 - 1), rng.random() < 0.5
        m.f_string = "".join(rng.choice("aé€𝄞z ") for _ in range(rng.randint(0, 8)))
        m.f_bytes = rng.randbytes(rng.randint(0, 8))
        m.f_uint32, m.f_sfixed32 = rng.randint(0, 2**32 - 1), rng.randint(-(2**31), 2**31 - 1)
        m.f_sfixed64, m.f_sint32 = rng.randint(-(2**63), 2**63 - 1), rng.randint(-5, 5)
        m.f_sint64 = rng.randint(-(2**63), 2**63 - 1)
    m.color = rng.randint(0, 2)
    for _ in range(rng.randint(0, 3)):
        m.counts[f"k{rng.randint(0, 9)}"] = rng.randint(-(2**40), 2**40)
        m.by_id[rng.randint(-5, 5)].CopyFrom(Inner(x=rng.randint(0, 9), y="v"))
        m.nums.append(rng.randint(-(2**31), 2**31 - 1))
        m.inners.add(x=rng.randint(0, 9), y=rng.choice(["", "q"]))
        m.colors.append(rng.randint(0, 2))
        m.stamps.add(seconds=rng.randint(-(10**10), 10**10), nanos=rng.randint(0, 999) * 1000)
    choice = rng.randint(0, 3)
    if choice == 1:
        m.c_text = rng.choice(["", "t"])
    elif choice == 2:
        m.c_num = rng.randint(-9, 9)
    elif choice == 3:
        m.c_inner.x = rng.randint(0, 9)
    for name, val in (("w_int64", 7), ("w_string", "s"), ("w_bool", False), ("w_double", 0.5),
                      ("w_bytes", b"\x00")):  # fmt: skip
        if rng.random() < 0.5:
            getattr(m, name).value = val
    if rng.random() < 0.7:
        m.ts.seconds, m.ts.nanos = rng.randint(-(10**10), 10**10), rng.randint(0, 999_999) * 1000
    if rng.random() < 0.7:
        m.dur.seconds, m.dur.nanos = rng.randint(0, 10**6), rng.randint(0, 999_999) * 1000
    if rng.random() < 0.5:
        m.opt = rng.randint(-3, 3)
    if rng.random() < 0.5:
        m.sub.y = "sub"
    if rng.random() < 0.3:
        m.meta.update({"a": 1.5, "b": [True, None, "x"], "c": {"d": "e"}})
    return m


def expected(m: Any) -> dict[str, Any]:
    """An independent reference conversion of a parsed ``All`` message, field by field."""

    def inner(i: Any) -> dict[str, Any]:
        return {"x": i.x, "y": i.y}

    def opt(name: str, conv: Any = lambda v: v) -> Any:
        return conv(getattr(m, name)) if m.HasField(name) else None

    out: dict[str, Any] = {f.name: getattr(m, f.name) for f in m.DESCRIPTOR.fields[:15]}
    which = m.WhichOneof("choice")
    out |= {
        "color": COLORS[m.color],
        "counts": dict(m.counts),
        "by_id": {k: inner(v) for k, v in m.by_id.items()},
        "nums": list(m.nums),
        "inners": [inner(i) for i in m.inners],
        "c_text": m.c_text if which == "c_text" else None,
        "c_num": m.c_num if which == "c_num" else None,
        "c_inner": inner(m.c_inner) if which == "c_inner" else None,
        "w_int64": opt("w_int64", lambda w: w.value),
        "w_string": opt("w_string", lambda w: w.value),
        "w_bool": opt("w_bool", lambda w: w.value),
        "w_double": opt("w_double", lambda w: w.value),
        "w_bytes": opt("w_bytes", lambda w: w.value),
        "ts": opt("ts", lambda t: t.ToDatetime(tzinfo=UTC)),
        "dur": opt("dur", lambda d: d.ToTimedelta()),
        "opt": opt("opt"),
        "sub": opt("sub", inner),
        "colors": [COLORS[c] for c in m.colors],
        "stamps": [t.ToDatetime(tzinfo=UTC) for t in m.stamps],
        "meta": opt("meta", json_format.MessageToDict),
    }
    return out


def _norm(row: dict[str, Any]) -> dict[str, Any]:
    row = dict(row)
    if row["meta"] is not None:
        row["meta"] = json.loads(row["meta"])
    return row


INNER = pa.struct([pa.field("x", pa.int32(), False), pa.field("y", pa.string(), False)])
TS = pa.timestamp("us", tz="UTC")


def test_arrow_schema_is_exact() -> None:
    c = codec()
    nn = {"nullable": False}
    want = pa.schema(
        [
            pa.field("f_double", pa.float64(), **nn), pa.field("f_float", pa.float32(), **nn),
            pa.field("f_int64", pa.int64(), **nn), pa.field("f_uint64", pa.uint64(), **nn),
            pa.field("f_int32", pa.int32(), **nn), pa.field("f_fixed64", pa.uint64(), **nn),
            pa.field("f_fixed32", pa.uint32(), **nn), pa.field("f_bool", pa.bool_(), **nn),
            pa.field("f_string", pa.string(), **nn), pa.field("f_bytes", pa.binary(), **nn),
            pa.field("f_uint32", pa.uint32(), **nn), pa.field("f_sfixed32", pa.int32(), **nn),
            pa.field("f_sfixed64", pa.int64(), **nn), pa.field("f_sint32", pa.int32(), **nn),
            pa.field("f_sint64", pa.int64(), **nn),
            pa.field("color", pa.string(), **nn),
            pa.field("counts", pa.map_(pa.string(), pa.int64()), **nn),
            pa.field("by_id", pa.map_(pa.int32(), INNER), **nn),
            pa.field("nums", pa.list_(pa.int32()), **nn),
            pa.field("inners", pa.list_(INNER), **nn),
            pa.field("c_text", pa.string()), pa.field("c_num", pa.int64()),
            pa.field("c_inner", INNER),
            pa.field("w_int64", pa.int64()), pa.field("w_string", pa.string()),
            pa.field("w_bool", pa.bool_()), pa.field("w_double", pa.float64()),
            pa.field("w_bytes", pa.binary()),
            pa.field("ts", TS), pa.field("dur", pa.duration("us")),
            pa.field("opt", pa.int32()), pa.field("sub", INNER),
            pa.field("colors", pa.list_(pa.string()), **nn),
            pa.field("stamps", pa.list_(TS), **nn),
            pa.field("meta", pa.string()),
        ]
    )  # fmt: skip
    assert c.arrow_schema.equals(want), c.arrow_schema
    assert c.name == "protobuf"


@pytest.mark.parametrize("seed", [1, 2])
def test_batch_and_value_agree_with_parsed_messages(seed: int) -> None:
    rng = random.Random(seed)
    msgs = [random_all(rng) for _ in range(300)]
    payloads = [frame(m) for m in msgs]
    c = codec()
    res = c.decode_batch(pa.array(payloads, pa.binary()))
    assert res.errors == []
    assert res.batch.schema.equals(c.arrow_schema)
    rows = res.batch.to_pylist(maps_as_pydicts="strict")
    for m, row, p in zip(msgs, rows, payloads, strict=True):
        parsed = All.FromString(m.SerializeToString())
        assert _norm(row) == expected(parsed)
        assert c.decode_value(p) == row


def test_empty_batch_has_the_schema() -> None:
    c = codec()
    res = c.decode_batch([])
    assert res.batch.num_rows == 0 and res.batch.schema.equals(c.arrow_schema)


@pytest.mark.parametrize(
    ("message_type", "indexes", "msg"),
    [
        ("First", [0], First(a="first")),
        ("Outer.Inner", [1, 0], Inner(x=3, y="nested")),
        ("Node", [3], Node(name="n")),
    ],
)
def test_message_indexes_select_non_first_and_nested(
    message_type: str, indexes: list[int], msg: Any
) -> None:
    c = codec(message_type)
    payload = frame(msg, indexes)
    if indexes == [0]:
        assert payload[5] == 0  # the one-byte [0] shorthand
    assert c.decode_value(payload)[c.arrow_schema.names[0]] == getattr(msg, c.arrow_schema.names[0])
    # The same body under another message's indexes is a schema mismatch, not garbage.
    wrong = frame(msg, [2])
    res = c.decode_batch([payload, wrong, payload])
    assert [e.index for e in res.errors] == [1]
    assert res.errors[0].kind is FailureKind.SCHEMA_MISMATCH
    assert f"`{PKG}.All`" in res.errors[0].message
    assert res.batch.num_rows == 2


def test_default_message_type_is_first_of_last_file_and_framing_none() -> None:
    c = ProtobufCodec(descriptor_set=descriptor_set(), framing="none")
    assert c.message_type == f"{PKG}.First"
    assert c.decode_value(First(a="bare").SerializeToString()) == {"a": "bare"}


def test_descriptor_set_from_path_and_object(tmp_path: Any) -> None:
    path = tmp_path / "all.pb"
    path.write_bytes(descriptor_set())
    fds = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set())
    for src in (path, str(path), fds):
        c = ProtobufCodec(descriptor_set=src, message_type=f"{PKG}.Outer.Inner")
        assert c.arrow_schema.names == ["x", "y"]


def test_private_pool_leaves_default_pool_alone() -> None:
    codec()
    with pytest.raises(KeyError):
        descriptor_pool.Default().FindMessageTypeByName(f"{PKG}.All")


def test_recursive_type_warns_at_start_and_counts_when_cap_bites(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "thalweg_bytewax"):
        c = codec("Node", max_depth=2)
    start = [r.getMessage() for r in caplog.records]
    assert any("max_depth=2" in s and "child.child" in s and f"{PKG}.Node" in s for s in start)
    t = c.arrow_schema.field("child").type
    assert t.field("child").type.field("child").type == pa.string()  # capped -> JSON text
    deep = Node(name="a")
    deep.child.name = "b"
    deep.child.child.name = "c"
    deep.child.child.child.name = "d"
    shallow = Node(name="z")
    caplog.clear()
    with caplog.at_level(logging.WARNING, "thalweg_bytewax"):
        res = c.decode_batch([frame(deep, [3]), frame(shallow, [3])])
    assert c.stats.depth_capped == 1
    assert any("hit max_depth" in r.getMessage() for r in caplog.records)
    row = res.batch.to_pylist()[0]
    assert json.loads(row["child"]["child"]["child"]) == {"name": "d"}
    assert res.batch.to_pylist()[1]["child"] is None
    assert c.decode_value(frame(deep, [3])) == row
    assert c.stats.depth_capped == 2


def test_default_depth_keeps_structs_for_non_recursive_types(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "thalweg_bytewax"):
        codec()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_reserved_prefix_field_is_a_decode_error_for_that_schema() -> None:
    c = codec("Reserved")
    res = c.decode_batch([frame(cls("Reserved")(ok="x"), [4])])
    assert res.batch.num_rows == 0
    assert res.errors[0].kind is FailureKind.RESERVED_FIELD
    assert "`_twg_offset`" in res.errors[0].message
    relaxed = codec("Reserved", metadata_prefix="_meta_")
    assert relaxed.decode_value(frame(cls("Reserved")(ok="x"), [4]))["ok"] == "x"


def test_bad_input_fails_per_row_and_good_rows_survive() -> None:
    c = codec()
    good = All(f_string="ok", f_int32=5)
    body = All(f_string="a long string field", f_bytes=b"xyz").SerializeToString()
    corrupt = encode_confluent(
        42, b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", message_indexes=[2]
    )
    bad_ts = All()
    bad_ts.ts.seconds = 10**15
    cases = [
        (encode_confluent(42, body[:-3], message_indexes=[2]), FailureKind.MALFORMED, "does not parse"),
        (corrupt, FailureKind.MALFORMED, "does not parse"),
        (b"\x01" + frame(good)[1:], FailureKind.BAD_FRAMING, "magic byte"),
        (b"\x00\x00", FailureKind.BAD_FRAMING, "too short"),
        (frame(good, [9]), FailureKind.BAD_FRAMING, "does not exist"),
        (None, FailureKind.NULL_PAYLOAD, "null"),
        (frame(bad_ts), FailureKind.MALFORMED, "Timestamp"),
    ]  # fmt: skip
    payloads: list[bytes | None] = [frame(good)]
    for p, _, _ in cases:
        payloads += [p, frame(good)]
    res = c.decode_batch(payloads)
    assert res.batch.num_rows == len(cases) + 1
    assert all(r["f_string"] == "ok" for r in res.batch.to_pylist())
    assert [e.index for e in res.errors] == list(range(1, 2 * len(cases), 2))
    for err, (p, kind, text) in zip(res.errors, cases, strict=True):
        assert err.kind is kind, err
        assert text in err.message, err
        assert err.message[0].islower() and not err.message.endswith(".")
        with pytest.raises(ProtobufDecodeError) as info:
            c.decode_value(p)  # type: ignore[arg-type]
        assert info.value.kind is kind


def test_decode_error_pickles() -> None:
    import pickle

    e = ProtobufDecodeError("x", FailureKind.MALFORMED)
    back = pickle.loads(pickle.dumps(e))
    assert back.kind is FailureKind.MALFORMED and str(back) == "x"


def test_unknown_enum_number_keeps_the_number() -> None:
    m = All()
    m.color = 7  # open proto3 enum
    m.colors.extend([1, 9])
    row = codec().decode_batch([frame(m)]).batch.to_pylist()[0]
    assert row["color"] == "7" and row["colors"] == ["RED", "9"]
    assert codec().decode_value(frame(m))["color"] == "7"


def test_unknown_open_enum_numbers_are_counted_and_warned_once_per_field(
    caplog: pytest.LogCaptureFixture,
) -> None:
    m = All()
    m.color = 7
    m.colors.extend([1, 9, 9])
    c = codec()
    with caplog.at_level(logging.WARNING):
        c.decode_batch([frame(m), frame(All())])
        c.decode_value(frame(m))
    assert c.stats.unknown_enums == 6
    warned = [r.getMessage() for r in caplog.records if "stats.unknown_enums" in r.getMessage()]
    assert len(warned) == 2
    assert any("`color`" in w for w in warned) and any("`colors`" in w for w in warned)


def test_sub_microsecond_nanos_are_truncated_and_counted() -> None:
    m = All()
    m.ts.seconds, m.ts.nanos = 1, 1_500
    c = codec()
    row = c.decode_batch([frame(m)]).batch.to_pylist()[0]
    assert row["ts"] == datetime(1970, 1, 1, 0, 0, 1, 1, tzinfo=UTC)
    assert c.stats.truncated_nanos == 1
    m.dur.seconds, m.dur.nanos = -2, -500_000
    assert c.decode_value(frame(m))["dur"] == timedelta(seconds=-2, microseconds=-500)


def test_truncated_nanos_warn_once_per_field(caplog: pytest.LogCaptureFixture) -> None:
    m = All()
    m.ts.seconds, m.ts.nanos = 1, 1_500
    m.dur.nanos = 7
    c = codec()
    with caplog.at_level(logging.WARNING):
        c.decode_batch([frame(m), frame(m)])
        c.decode_value(frame(m))
    warned = [r.getMessage() for r in caplog.records if "sub-microsecond" in r.getMessage()]
    assert len(warned) == 2 and "`ts`" in warned[0] and "`dur`" in warned[1]
    assert c.stats.truncated_nanos == 6


@pytest.mark.parametrize(
    ("field", "seconds", "nanos"),
    [
        ("ts", 100, -1_500),  # Timestamp nanos must be 0..999,999,999
        ("ts", 100, 1_000_000_000),
        ("dur", 1, -1),  # Duration seconds and nanos must not have opposite signs
        ("dur", -1, 1),
        ("dur", 0, 1_000_000_000),
    ],
)
def test_invalid_timestamp_and_duration_nanos_fail_the_row(
    field: str, seconds: int, nanos: int
) -> None:
    bad = All(f_string="bad")
    getattr(bad, field).seconds = seconds
    getattr(bad, field).nanos = nanos
    good = frame(All(f_string="ok"))
    c = codec()
    res = c.decode_batch([good, frame(bad), good])
    assert [(e.index, e.kind) for e in res.errors] == [(1, FailureKind.MALFORMED)]
    assert f"`{field}`" in res.errors[0].message
    assert res.batch.column("f_string").to_pylist() == ["ok", "ok"]
    with pytest.raises(ProtobufDecodeError, match=f"`{field}`"):
        c.decode_value(frame(bad))


def test_config_errors_are_clear() -> None:
    from thalweg_bytewax.errors import ConfigError

    with pytest.raises(ConfigError, match="exactly one of"):
        ProtobufCodec()
    with pytest.raises(ConfigError, match="`twg.test.Nope` is not in the descriptor set"):
        codec("Nope")
    with pytest.raises(ConfigError, match="framing"):
        codec(framing="avro")
    with pytest.raises(ConfigError, match="not a serialized FileDescriptorSet"):
        ProtobufCodec(descriptor_set=b"\xff\xff")


def test_uniform_frame_batch_equals_the_per_row_path() -> None:
    # Headers (even all-null) take the per-row peel; without them a batch whose rows
    # share one frame is sliced and parsed in one pass. Both must give the same result.
    rng = random.Random(5)
    c = codec()
    good = [frame(random_all(rng)) for _ in range(50)]
    body = All(f_string="x" * 40).SerializeToString()
    bad_body = encode_confluent(42, body[:-3], message_indexes=[2])  # same frame, truncated
    for payloads in (good, [*good[:20], bad_body, *good[20:]]):
        fast = c.decode_batch(pa.array(payloads, pa.binary()))
        slow = c.decode_batch(payloads, headers=[None] * len(payloads))
        assert fast.batch.equals(slow.batch)
        assert fast.errors == slow.errors
    assert [e.index for e in fast.errors] == [20]
    assert fast.errors[0].kind is FailureKind.MALFORMED
    assert gc.isenabled()


def test_sample_orders_batch_equals_decode_value() -> None:
    from thalweg_bytewax.dev.samples import encode_order_proto, order_descriptor_set, sample_orders

    c = ProtobufCodec(descriptor_set=order_descriptor_set(), message_type="thalweg.samples.Order")
    payloads = [encode_order_proto(o) for o in sample_orders(300)]
    res = c.decode_batch(pa.array(payloads, pa.binary()))
    assert res.errors == []
    rows = res.batch.to_pylist()
    assert rows == [c.decode_value(p) for p in payloads]
    assert rows == c.decode_batch(payloads, headers=[None] * len(payloads)).batch.to_pylist()
