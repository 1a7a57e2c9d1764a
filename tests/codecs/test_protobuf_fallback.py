"""Protobuf bad rows: exact statistics and a cost that follows the data, not the plan.

When a batch's columnar conversion fails, the codec finds the bad rows and converts the
rest. Counters count each converted row once, whichever path converted it, and the
search never runs one columnar pass per row (a pass walks the whole plan, milliseconds
per row on a large message type).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

from tests.codecs.test_protobuf import All, codec, frame
from thalweg_bytewax.codecs import FailureKind, _proto_arrow, _proto_nodes
from thalweg_bytewax.codecs.protobuf import ProtobufCodec, ProtobufDecodeError

OPT, REP = F.LABEL_OPTIONAL, F.LABEL_REPEATED
BAD = 10**6


def _nanos_row(*, bad: bool) -> bytes:
    m = All(f_string="bad" if bad else "ok")
    m.ts.seconds, m.ts.nanos = 1, 1_500  # truncated to 1 us: counted
    m.color = 7  # an open-enum number the schema does not name: counted
    if bad:
        m.dur.seconds, m.dur.nanos = 1, -1  # `dur` converts after `ts`: the row fails late
    return frame(m)


def test_stats_count_each_row_once_after_a_fallback() -> None:
    c = codec()
    good, bad = _nanos_row(bad=False), _nanos_row(bad=True)
    res = c.decode_batch([good, bad, good, good, bad])
    assert [e.index for e in res.errors] == [1, 4]
    assert (c.stats.decoded, c.stats.failed) == (3, 2)
    assert (c.stats.truncated_nanos, c.stats.unknown_enums) == (3, 3)
    with pytest.raises(ProtobufDecodeError):
        c.decode_value(bad)
    assert (c.stats.truncated_nanos, c.stats.unknown_enums, c.stats.failed) == (3, 3, 3)
    c.decode_value(good)
    assert (c.stats.truncated_nanos, c.stats.unknown_enums, c.stats.decoded) == (4, 4, 4)


def test_stats_are_the_same_on_the_per_row_path() -> None:
    fast, slow = codec(), codec()
    payloads = [_nanos_row(bad=i % 3 == 1) for i in range(30)]
    a = fast.decode_batch(pa.array(payloads, pa.binary()))
    b = slow.decode_batch(payloads, headers=[None] * len(payloads))
    assert a.errors == b.errors and a.batch.equals(b.batch)
    assert fast.stats == slow.stats
    assert (fast.stats.decoded, fast.stats.truncated_nanos) == (20, 20)


# ---------------------------------------------------------------------------- cost


def _wide_fds(*, proto2_wrappers: bool = False) -> descriptor_pb2.FileDescriptorSet:
    """``b.Big``: 20 optional and 20 repeated ``Sub`` fields, each ``Sub`` 21 fields."""
    fds = descriptor_pb2.FileDescriptorSet()
    wrappers = descriptor_pb2.FileDescriptorProto.FromString(wrappers_pb2.DESCRIPTOR.serialized_pb)
    if proto2_wrappers:  # a descriptor set may bring its own copy of a well-known file
        wrappers.syntax = "proto2"
    fds.file.append(wrappers)
    f = fds.file.add(name="big.proto", package="b", syntax="proto2")
    f.dependency.append("google/protobuf/wrappers.proto")
    f.message_type.add(name="Nothing")
    sub = f.message_type.add(name="Sub")
    for i in range(20):
        sub.field.add(name=f"s{i}", number=i + 1, type=F.TYPE_INT64, label=OPT)
    sub.field.add(name="nothing", number=30, type=F.TYPE_MESSAGE, label=REP, type_name=".b.Nothing")
    big = f.message_type.add(name="Big")
    big.field.add(name="id", number=1, type=F.TYPE_INT64, label=OPT)
    big.field.add(
        name="label", number=2, type=F.TYPE_MESSAGE, label=OPT,
        type_name=".google.protobuf.StringValue",
    )  # fmt: skip
    for i in range(20):
        big.field.add(name=f"m{i}", number=10 + i, type=F.TYPE_MESSAGE, label=OPT, type_name=".b.Sub")
        big.field.add(name=f"r{i}", number=100 + i, type=F.TYPE_MESSAGE, label=REP, type_name=".b.Sub")
    return fds


def _big_class(fds: descriptor_pb2.FileDescriptorSet) -> Any:
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("b.Big"))


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts columnar passes over the top-level plan and field conversions (a spy)."""
    seen = {"top": 0, "fields": 0}
    columns = _proto_arrow.MessagePlan.columns
    column = _proto_arrow._FieldPlan.column

    def spy_columns(self: Any, msgs: Any, stats: Any) -> Any:
        if self.full_name == "b.Big":
            seen["top"] += 1
        return columns(self, msgs, stats)

    def spy_column(self: Any, msgs: Any, stats: Any) -> Any:
        seen["fields"] += 1
        return column(self, msgs, stats)

    monkeypatch.setattr(_proto_arrow.MessagePlan, "columns", spy_columns)
    monkeypatch.setattr(_proto_arrow._FieldPlan, "column", spy_column)
    return seen


def test_a_batch_converts_only_the_sub_messages_its_rows_set(passes: dict[str, int]) -> None:
    fds = _wide_fds()
    big = _big_class(fds)
    c = ProtobufCodec(descriptor_set=fds, message_type="b.Big", framing="none")
    rows = [big(id=i) for i in range(50)]
    for m in rows[::2]:
        m.m3.s1 = 7
    res = c.decode_batch([m.SerializeToString() for m in rows])
    assert res.errors == [] and res.batch.num_rows == 50
    unset = dict.fromkeys((f"s{i}" for i in range(20)), None)  # proto2: presence
    assert res.batch.column("m3").to_pylist()[:2] == [{**unset, "s1": 7, "nothing": []}, None]
    # 42 top-level fields + the 21 of the one sub-message set; not all 42 + 40 * 21.
    assert passes["fields"] <= 42 + 21 + 21  # the repeated ones convert no element


@pytest.mark.parametrize("bad_every", [1, 7])
def test_bad_rows_never_cost_a_columnar_pass_each(bad_every: int, passes: dict[str, int]) -> None:
    # A proto2 StringValue carries invalid UTF-8 that only Arrow used to refuse; every row
    # also holds a non-empty repeated empty message, which Arrow used to refuse too.
    fds = _wide_fds(proto2_wrappers=True)
    big = _big_class(fds)
    c = ProtobufCodec(descriptor_set=fds, message_type="b.Big", framing="none")
    payloads = []
    for i in range(64):
        m = big(id=i)
        m.r0.add(s0=i).nothing.add()
        # `label` (2) = StringValue{value (1): b"\xff\xfe"}, written by hand: the Python
        # runtime refuses to build a string that is not UTF-8.
        label = b"\x12\x04\x0a\x02\xff\xfe" if i % bad_every == 0 else b"\x12\x04\x0a\x02ok"
        payloads.append(m.SerializeToString() + label)
    res = c.decode_batch(payloads)
    n_bad = len(range(0, 64, bad_every))
    assert len(res.errors) == n_bad and res.batch.num_rows == 64 - n_bad
    assert all(e.kind is FailureKind.MALFORMED for e in res.errors)
    assert all("`label`" in e.message and "UTF-8" in e.message for e in res.errors)
    assert passes["top"] <= 3
    assert c.stats.failed == n_bad and c.stats.decoded == 64 - n_bad
    with pytest.raises(ProtobufDecodeError, match="`label`"):
        c.decode_value(payloads[0])


def test_a_value_only_arrow_refuses_is_isolated_by_halving(
    passes: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault injection: the Arrow step of one scalar node refuses the value BAD, which the
    # dict path accepts. No such value is known today; the search must still find it.
    real = _proto_nodes._Node.array

    def refuse_bad(self: Any, values: list[Any], mask: Any, stats: Any) -> pa.Array:
        if BAD in values and self.arrow_type == pa.int64():
            msg = "injected: Arrow refuses the value"
            raise pa.ArrowInvalid(msg)
        return real(self, values, mask, stats)

    monkeypatch.setattr(_proto_nodes._Node, "array", refuse_bad)
    fds = _wide_fds()
    big = _big_class(fds)
    c = ProtobufCodec(descriptor_set=fds, message_type="b.Big", framing="none")
    payloads = [big(id=BAD if i in (5, 40) else i).SerializeToString() for i in range(64)]
    res = c.decode_batch(payloads)
    assert [(e.index, e.kind) for e in res.errors] == [(5, FailureKind.MALFORMED), (40, FailureKind.MALFORMED)]
    assert "injected" in res.errors[0].message
    ids = res.batch.column("id").to_pylist()
    assert ids == [i for i in range(64) if i not in (5, 40)]
    assert passes["top"] <= 2 + 2 * 2 * 6  # two rows, each found in log2(64) halvings
    assert c.stats.decoded == 62 and c.stats.failed == 2


def test_an_unknown_schema_id_is_asked_once_per_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    from thalweg_bytewax.codecs import _proto_pool
    from thalweg_bytewax.codecs.framing import encode_confluent

    asked: list[int | str] = []
    load = _proto_pool.RegistryDescriptors._load

    def spy_load(self: Any, key: int | str) -> Any:
        asked.append(key)
        return load(self, key)

    monkeypatch.setattr(_proto_pool.RegistryDescriptors, "_load", spy_load)
    c = ProtobufCodec(f"mock://twg-proto-{uuid.uuid4().hex}")
    payloads = [encode_confluent(77, b"\x08\x01", message_indexes=[0])] * 50
    for batch in (1, 2):
        res = c.decode_batch(payloads)
        assert len(res.errors) == 50
        assert {e.kind for e in res.errors} == {FailureKind.UNKNOWN_SCHEMA}
        assert all("schema id 77" in e.message for e in res.errors)
        assert asked == [77] * batch  # once per batch: a schema registered later is found
    assert c.stats.failed == 100
