"""Empty messages (``google.protobuf.Empty``, any ``message E {}``) in Protobuf decode.

An empty message is a ``struct<>`` in Arrow: no children, but the batch length and
the nulls of an unset field are kept. ``decode_value`` and ``decode_batch`` agree on it
at any depth: singular, repeated, in a oneof, as a map value, below the depth cap, and
as the decoded type itself.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, empty_pb2, message_factory
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.codecs.protobuf import ProtobufCodec

OPT, REP = F.LABEL_OPTIONAL, F.LABEL_REPEATED
GE = ".google.protobuf.Empty"
EMPTY: pa.DataType = pa.struct([])


def _map_entry(msg: Any, name: str, key_type: int, value_type_name: str) -> None:
    e = msg.nested_type.add(name=name)
    e.options.map_entry = True
    e.field.add(name="key", number=1, type=key_type, label=OPT)
    e.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=OPT, type_name=value_type_name)


def make_fds() -> descriptor_pb2.FileDescriptorSet:
    fds = descriptor_pb2.FileDescriptorSet()
    fds.file.append(descriptor_pb2.FileDescriptorProto.FromString(empty_pb2.DESCRIPTOR.serialized_pb))
    f = fds.file.add(name="e.proto", package="e", syntax="proto3")
    f.dependency.append("google/protobuf/empty.proto")
    f.message_type.add(name="E")  # a user-declared empty message
    h = f.message_type.add(name="Holder")  # empty messages one level down
    h.field.add(name="e", number=1, type=F.TYPE_MESSAGE, label=OPT, type_name=".e.E")
    h.field.add(name="es", number=2, type=F.TYPE_MESSAGE, label=REP, type_name=".e.E")
    h.field.add(name="g", number=3, type=F.TYPE_MESSAGE, label=OPT, type_name=GE)
    c = f.message_type.add(name="Chain")  # recursive: empty messages at any depth
    c.field.add(name="next", number=1, type=F.TYPE_MESSAGE, label=OPT, type_name=".e.Chain")
    c.field.add(name="e", number=2, type=F.TYPE_MESSAGE, label=OPT, type_name=".e.E")
    c.field.add(name="es", number=3, type=F.TYPE_MESSAGE, label=REP, type_name=GE)
    m = f.message_type.add(name="M")
    _map_entry(m, "MeEntry", F.TYPE_STRING, ".e.E")
    _map_entry(m, "MgEntry", F.TYPE_INT32, GE)
    _map_entry(m, "MhEntry", F.TYPE_STRING, ".e.Holder")
    m.oneof_decl.add(name="o")
    fields: list[tuple[str, int, Any, str | None, dict[str, Any]]] = [
        ("x", 1, OPT, None, {"type": F.TYPE_INT32}),
        ("e", 2, OPT, GE, {}),
        ("es", 3, REP, GE, {}),
        ("ue", 4, OPT, ".e.E", {}),
        ("ues", 5, REP, ".e.E", {}),
        ("oe", 6, OPT, ".e.E", {"oneof_index": 0}),
        ("os", 7, OPT, None, {"type": F.TYPE_STRING, "oneof_index": 0}),
        ("me", 8, REP, ".e.M.MeEntry", {}),
        ("mg", 9, REP, ".e.M.MgEntry", {}),
        ("mh", 10, REP, ".e.M.MhEntry", {}),
        ("h", 11, OPT, ".e.Holder", {}),
        ("hs", 12, REP, ".e.Holder", {}),
        ("chain", 13, OPT, ".e.Chain", {}),
    ]
    for name, num, label, type_name, extra in fields:
        fd = m.field.add(name=name, number=num, label=label)
        fd.type = extra.pop("type", F.TYPE_MESSAGE)
        if type_name:
            fd.type_name = type_name
        for k, v in extra.items():
            setattr(fd, k, v)
    return fds


FDS = make_fds()
_POOL = descriptor_pool.DescriptorPool()
for _f in FDS.file:
    _POOL.Add(_f)
M: Any = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("e.M"))


def codec(message_type: str = "e.M", **kw: Any) -> ProtobufCodec:
    return ProtobufCodec(descriptor_set=FDS, message_type=message_type, framing="none", **kw)


def test_minimal_schema_of_the_report_decodes_on_both_paths() -> None:
    a = M(x=1)
    a.e.SetInParent()
    b = M(x=2)
    b.es.add()
    b.es.add()
    plain = M(x=3)
    payloads = [p.SerializeToString() for p in (a, b, plain)]
    c = codec()
    for batch in ([payloads[0]], [payloads[1]], payloads, [payloads[0], payloads[0]]):
        res = c.decode_batch(batch)
        assert res.errors == []
        assert res.batch.num_rows == len(batch)
        assert res.batch.to_pylist(maps_as_pydicts="strict") == [c.decode_value(p) for p in batch]
    rows = c.decode_batch(payloads).batch.to_pylist()
    assert [(r["x"], r["e"], r["es"]) for r in rows] == [(1, {}, []), (2, None, [{}, {}]), (3, None, [])]
    assert c.stats.failed == 0


def test_empty_message_arrow_type_is_an_empty_struct_with_nulls() -> None:
    c = codec()
    schema = c.arrow_schema
    assert schema.field("e").type == EMPTY and schema.field("e").nullable
    assert schema.field("es").type == pa.list_(EMPTY)
    assert schema.field("me").type == pa.map_(pa.string(), EMPTY)
    a = M()
    a.e.SetInParent()
    col = c.decode_batch([a.SerializeToString(), M().SerializeToString()]).batch.column("e")
    assert len(col) == 2 and col.null_count == 1
    col.validate(full=True)


def test_empty_message_as_the_decoded_type_keeps_every_row() -> None:
    c = codec("e.E")
    assert len(c.arrow_schema) == 0
    res = c.decode_batch([b"", b"", b""])
    assert res.errors == [] and res.batch.num_rows == 3
    assert c.decode_value(b"") == {}
    assert c.stats.decoded == 4


def _holder(draw: st.DrawFn, msg: Any) -> None:
    if draw(st.booleans()):
        msg.e.SetInParent()
    for _ in range(draw(st.integers(0, 2))):
        msg.es.add()
    if draw(st.booleans()):
        msg.g.SetInParent()


@st.composite
def messages(draw: st.DrawFn) -> Any:
    m = M(x=draw(st.integers(-5, 5)))
    if draw(st.booleans()):
        m.e.SetInParent()
    for _ in range(draw(st.integers(0, 3))):
        m.es.add()
    if draw(st.booleans()):
        m.ue.SetInParent()
    for _ in range(draw(st.integers(0, 3))):
        m.ues.add()
    choice = draw(st.sampled_from(["none", "oe", "os"]))
    if choice == "oe":
        m.oe.SetInParent()
    elif choice == "os":
        m.os = draw(st.sampled_from(["", "s"]))
    for k in draw(st.lists(st.sampled_from("abc"), max_size=3)):
        m.me[k].SetInParent()
    for n in draw(st.lists(st.integers(-2, 2), max_size=3)):
        m.mg[n].SetInParent()
    for k in draw(st.lists(st.sampled_from("xy"), max_size=2)):
        _holder(draw, m.mh[k])
    if draw(st.booleans()):
        m.h.SetInParent()
        _holder(draw, m.h)
    for _ in range(draw(st.integers(0, 2))):
        _holder(draw, m.hs.add())
    depth = draw(st.integers(0, 6))
    if depth:
        link = m.chain
        link.SetInParent()
        for i in range(depth):
            if draw(st.booleans()):
                link.e.SetInParent()
            for _ in range(draw(st.integers(0, 2))):
                link.es.add()
            if i + 1 < depth:
                link = link.next
                link.SetInParent()
    return m


def _holder_ref(h: Any) -> dict[str, Any]:
    return {
        "e": {} if h.HasField("e") else None,
        "es": [{} for _ in h.es],
        "g": {} if h.HasField("g") else None,
    }


def _chain_ref(c: Any, depth: int, max_depth: int) -> Any:
    """``chain`` at ``depth``; past ``max_depth`` a sub-message is its JSON text."""
    if depth > max_depth:
        return json.dumps(_chain_json(c), separators=(", ", ": "))
    return {
        "next": _chain_ref(c.next, depth + 1, max_depth) if c.HasField("next") else None,
        "e": ({} if depth + 1 <= max_depth else "{}") if c.HasField("e") else None,
        "es": [{} if depth + 1 <= max_depth else "{}" for _ in c.es],
    }


def _chain_json(c: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if c.HasField("next"):
        out["next"] = _chain_json(c.next)
    if c.HasField("e"):
        out["e"] = {}
    if len(c.es):
        out["es"] = [{} for _ in c.es]
    return out


def reference(m: Any, max_depth: int) -> dict[str, Any]:
    """An independent conversion of a parsed ``M`` (depth 1 = fields of ``M``'s fields)."""
    which = m.WhichOneof("o")
    return {
        "x": m.x,
        "e": {} if m.HasField("e") else None,
        "es": [{} for _ in m.es],
        "ue": {} if m.HasField("ue") else None,
        "ues": [{} for _ in m.ues],
        "oe": {} if which == "oe" else None,
        "os": m.os if which == "os" else None,
        "me": {k: {} for k in m.me},
        "mg": {k: {} for k in m.mg},
        "mh": {k: _holder_ref(v) for k, v in m.mh.items()},
        "h": _holder_ref(m.h) if m.HasField("h") else None,
        "hs": [_holder_ref(h) for h in m.hs],
        "chain": _chain_ref(m.chain, 1, max_depth) if m.HasField("chain") else None,
    }


@pytest.mark.parametrize("max_depth", [3, 32])
@given(st.lists(messages(), min_size=1, max_size=8))
def test_empty_messages_at_any_depth_agree_on_every_path(max_depth: int, msgs: list[Any]) -> None:
    c = codec(max_depth=max_depth)
    payloads = [m.SerializeToString() for m in msgs]
    fast = c.decode_batch(pa.array(payloads, pa.binary()))
    slow = c.decode_batch(payloads, headers=[None] * len(payloads))
    assert fast.errors == [] and slow.errors == []
    assert fast.batch.equals(slow.batch)
    fast.batch.validate(full=True)
    rows = fast.batch.to_pylist(maps_as_pydicts="strict")
    assert len(rows) == len(msgs)
    for p, row in zip(payloads, rows, strict=True):
        assert c.decode_value(p) == row
        assert row == reference(M.FromString(p), max_depth)
