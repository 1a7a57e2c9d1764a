"""The native exactness walk of the Avro fast path against the column-wise check it replaces.

``_avro_walk.walk`` proves, before polars reads a block, that each body holds exactly
one record of the writer schema in its canonical encoding. Where the extension is not
built, the fast path proves the same after decoding, from polars' columns
(``_avro_fast._columns_exact``). Both must accept the same bodies: random schemas and
records written by fastavro, then corrupted, are put through both; the codec's result
(batch and failures) must not depend on which check ran. Every reason the walk reports
is hit here with its byte offset, as is every bound it keeps.
"""

from __future__ import annotations

import io
import json
import logging
import math
import uuid
from decimal import Decimal
from typing import Any

import fastavro
import polars
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tests.codecs.avro_wire import zz
from tests.codecs.test_avro_property import _cases
from tests.fixtures.budget import examples
from thalweg_bytewax.codecs import _avro_fast, _avro_ocf, _avro_walk
from thalweg_bytewax.codecs.avro import AvroCodec
from thalweg_bytewax.codecs.base import FailureKind

pytestmark = pytest.mark.skipif(not _avro_walk.NATIVE, reason="the native walk is not built")

(OK, TRUNCATED, CUT_VARINT, LEFTOVER, LONG_VARINT, PADDED_VARINT, INT_RANGE, BAD_BOOLEAN,
 BAD_BRANCH, BAD_ENUM, NEGATIVE_LENGTH, BLOCKS, BLOCK_SIZE, COUNT, BAD_UUID, BAD_DECIMAL,
 RANGE, PRECISION) = range(18)  # fmt: skip


def _node(schema: dict[str, Any]) -> Any:
    return AvroCodec(framing="none", schema=schema)._schemas.writers["fixed"].node


def _walk(schema: dict[str, Any], bodies: list[bytes], *, canonical: bool = True) -> Any:
    code = _avro_walk.program(_node(schema))
    assert code is not None
    walked = _avro_walk.walk(code, pa.array(bodies, pa.binary()), canonical=canonical)
    assert walked is not None
    return walked


def _one(schema: dict[str, Any], body: bytes, *, canonical: bool = True) -> tuple[int, int]:
    walked = _walk(schema, [body], canonical=canonical)
    return int(walked.status[0]), int(walked.where[0])


def _field(t: Any) -> dict[str, Any]:
    """A record of a long (one byte in every body here) and then a field of type ``t``."""
    return {
        "type": "record",
        "name": "Row",
        "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": t}],
    }


def _logical(t: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "Row", "fields": [{"name": "v", "type": t}]}


def _field_pair(a: Any, b: Any) -> dict[str, Any]:
    return {
        "type": "record",
        "name": "Pair",
        "fields": [{"name": "a", "type": a}, {"name": "b", "type": b}],
    }


_UUID = str(uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0))
_EMPTY = {"type": "record", "name": "Empty", "fields": []}

# (the field's type, the bytes after the leading long, status, offset from the field)
REASONS = [
    ("long", b"", TRUNCATED, 0),
    ("string", zz(5) + b"ab", TRUNCATED, 0),
    ("double", b"\x00" * 7, TRUNCATED, 0),
    ({"type": "fixed", "name": "F", "size": 4}, b"abc", TRUNCATED, 0),
    ("long", b"\x80\x80", CUT_VARINT, 0),
    ("long", b"\x02\x00", LEFTOVER, 1),
    ("long", b"\xff" * 10, LONG_VARINT, 0),
    ("long", b"\x82\x00", PADDED_VARINT, 0),
    ("int", zz(2**31), INT_RANGE, 0),
    ("int", zz(-(2**31) - 1), INT_RANGE, 0),
    ("boolean", b"\x02", BAD_BOOLEAN, 0),
    (["null", "long"], zz(2), BAD_BRANCH, 0),
    (["null", "long"], zz(-1), BAD_BRANCH, 0),
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, zz(2), BAD_ENUM, 0),
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, zz(-1), BAD_ENUM, 0),
    ("bytes", zz(-1), NEGATIVE_LENGTH, 0),
    ({"type": "array", "items": "long"}, zz(-1) + zz(1) + zz(1) + b"\x00", BLOCKS, 0),
    ({"type": "array", "items": "long"}, zz(1) + zz(1) + zz(1) + zz(2) + b"\x00", BLOCKS, 2),
    ({"type": "map", "values": "long"}, zz(1) + zz(1) + b"k" + zz(1) + zz(1), BLOCKS, 4),
    ({"type": "array", "items": "long"}, zz(10) + zz(1) + b"\x00", COUNT, 0),
    ({"type": "array", "items": _EMPTY}, zz(2**16 + 1) + b"\x00", COUNT, 0),
    ({"type": "string", "logicalType": "uuid"}, zz(36) + _UUID.upper().encode(), BAD_UUID, 0),
    (
        {"type": "string", "logicalType": "uuid"},
        zz(32) + _UUID.replace("-", "").encode(),
        BAD_UUID,
        0,
    ),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        zz(0),
        BAD_DECIMAL,
        0,
    ),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        zz(2) + b"\x00\x01",
        BAD_DECIMAL,
        0,
    ),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        zz(2) + b"\xff\x80",
        BAD_DECIMAL,
        0,
    ),
    (  # more bytes than an int64: more than the column-wise check accepts
        {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        zz(9) + b"\x01" + bytes(8),
        BAD_DECIMAL,
        0,
    ),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 0},
        zz(2) + b"\x01\x00",  # 256
        PRECISION,
        0,
    ),
    (
        {"type": "fixed", "name": "D", "size": 2, "logicalType": "decimal", "precision": 2},
        b"\xff\x9c",  # -100
        PRECISION,
        0,
    ),
    ({"type": "int", "logicalType": "time-millis"}, zz(86_400_000), RANGE, 0),
    ({"type": "long", "logicalType": "time-micros"}, zz(-1), RANGE, 0),
    ({"type": "int", "logicalType": "date"}, zz(2_932_897), RANGE, 0),
    ({"type": "long", "logicalType": "timestamp-millis"}, zz(2**63 - 1), RANGE, 0),
    ({"type": "long", "logicalType": "timestamp-micros"}, zz(-(2**63)), RANGE, 0),
]


@pytest.mark.parametrize(("t", "tail", "status", "at"), REASONS)
def test_each_reason_is_reported_with_the_offset_of_the_failing_read(
    t: Any, tail: bytes, status: int, at: int
) -> None:
    assert _one(_field(t), zz(7) + tail) == (status, 1 + at)


def test_every_reason_has_a_text_and_a_case() -> None:
    assert set(_avro_walk.REASONS) == set(range(1, 18))
    lenient = {BLOCK_SIZE}  # only a sized block (canonical=False) can be the wrong size
    assert {status for *_, status, _ in REASONS} | lenient == set(_avro_walk.REASONS)


def test_a_sized_block_of_the_wrong_size_is_reported_only_outside_canonical_mode() -> None:
    t = _field({"type": "array", "items": "long"})
    sized = zz(7) + zz(-1) + zz(2) + zz(1) + b"\x00"  # one item of one byte, said to be two
    assert _one(t, sized, canonical=False) == (BLOCK_SIZE, 4)
    assert _one(t, sized) == (BLOCKS, 1)


@pytest.mark.parametrize(
    "tail",
    [
        zz(-2) + zz(2) + zz(1) + zz(2) + b"\x00",  # a sized block of two items
        zz(1) + zz(1) + zz(1) + zz(2) + b"\x00",  # two blocks of one item
        zz(-1) + zz(1) + zz(1) + zz(1) + zz(2) + b"\x00",  # a sized block, then another
    ],
)
def test_outside_canonical_mode_every_block_layout_of_the_spec_is_accepted(tail: bytes) -> None:
    t = _field({"type": "array", "items": "long"})
    assert _one(t, zz(7) + tail, canonical=False) == (OK, 0)
    assert _one(t, zz(7) + tail)[0] == BLOCKS


def test_a_padded_varint_is_accepted_only_outside_canonical_mode() -> None:
    assert _one(_field("long"), zz(7) + b"\x82\x00", canonical=False) == (OK, 0)
    assert _one(_field("long"), zz(7) + b"\x82\x00") == (PADDED_VARINT, 1)


def test_the_largest_and_smallest_longs_and_ints_are_read() -> None:
    for value in (2**63 - 1, -(2**63), 0, -1, 63, -64, 64):
        assert _one(_field("long"), zz(7) + zz(value)) == (OK, 0), value
    for value in (2**31 - 1, -(2**31)):
        assert _one(_field("int"), zz(7) + zz(value)) == (OK, 0), value


def test_status_and_offsets_follow_sliced_arrays_and_every_row_is_counted() -> None:
    t = _field("long")
    arr = pa.array([b"junk", zz(1) + zz(2), zz(1), zz(1) + zz(2) + b"x", zz(3) + zz(4)])
    code = _avro_walk.program(_node(t))
    assert code is not None
    walked = _avro_walk.walk(code, arr.slice(1))
    assert walked is not None
    assert walked.status.tolist() == [OK, TRUNCATED, LEFTOVER, OK]
    assert walked.where.tolist() == [0, 1, 2, 0]
    assert (walked.bad, walked.first) == (2, 1)


def test_bodies_the_walk_cannot_read_are_left_to_the_column_check() -> None:
    code = _avro_walk.program(_node(_field("long")))
    assert code is not None
    assert _avro_walk.walk(code, pa.array([zz(1) + zz(2), None], pa.binary())) is None
    assert _avro_walk.walk(code, pa.array([zz(1) + zz(2)], pa.large_binary())) is None
    walked = _avro_walk.walk(code, pa.array([], pa.binary()))
    assert walked is not None
    assert (len(walked.status), walked.bad, walked.first) == (0, 0, -1)


def test_a_malformed_program_or_offsets_raise_before_any_body_is_read() -> None:
    from thalweg_bytewax.codecs import _avro_native  # noqa: PLC0415

    one = pa.array([b"\x02"])
    offsets = one.buffers()[1]
    data = one.buffers()[2]

    def words(*w: int) -> bytes:
        return b"".join(x.to_bytes(4, "little", signed=True) for x in w)

    for bad in (b"", b"\x00\x00", words(99), words(12, 2, 3), words(10, 0), words(3, 3)):
        with pytest.raises(ValueError, match="avro program"):
            _avro_native.walk(bad, data, offsets)
    deep = words(*([14] * 70), 3)  # arrays nested past the depth bound
    with pytest.raises(ValueError, match="too deep"):
        _avro_native.walk(deep, data, offsets)
    with pytest.raises(ValueError, match="offsets"):
        _avro_native.walk(words(3), data, words(0, 5))


def test_a_schema_deeper_than_the_walk_is_checked_from_the_columns() -> None:
    t: Any = "long"
    for _ in range(_avro_walk.MAX_DEPTH + 1):
        t = {"type": "array", "items": t}
    assert _avro_walk.program(_node(_field(t))) is None
    assert _avro_walk.program(_node(_field({"type": "array", "items": "long"}))) is not None


# -- property tests -------------------------------------------------------------------


def _write(schema: dict[str, Any], records: list[Any]) -> list[bytes]:
    parsed = fastavro.parse_schema(schema)
    out = []
    for rec in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        out.append(buf.getvalue())
    return out


@settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(_cases(), st.data())
def test_written_bodies_walk_and_no_prefix_or_extension_of_them_does(
    case: tuple[dict[str, Any], list[Any]], data: st.DataObject
) -> None:
    """Every schema (maps and general unions too): what fastavro writes is one record."""
    schema, records = case
    bodies = _write(schema, records)
    for canonical in (True, False):
        walked = _walk(schema, bodies, canonical=canonical)
        assert walked.status.tolist() == [OK] * len(bodies)
    body = data.draw(st.sampled_from(bodies))
    cut = data.draw(st.integers(0, len(body) - 1)) if body else 0
    if body:  # Avro bodies are prefix-free: a complete record ends where it ends
        assert _one(schema, body[:cut])[0] in (TRUNCATED, CUT_VARINT, COUNT)
    extra = data.draw(st.binary(min_size=1, max_size=3))
    assert _one(schema, body + extra) == (LEFTOVER, len(body))


def _corrupt(body: bytes, how: int, at: int, byte: int) -> bytes:
    at = at % (len(body) + 1)
    return [
        body[:at],  # cut short
        body + bytes([byte]),  # a byte too many
        body[:at] + bytes([byte]) + body[at + 1 :],  # a byte replaced
        body[:at] + bytes([byte]) + body[at:],  # a byte inserted
        body[:at] + body[at + 1 :],  # a byte removed
        body,
    ][how]


_corruption = st.tuples(st.integers(0, 5), st.integers(0, 2**16), st.integers(0, 255))


def _columns_verdict(node: Any, header: bytes, body: bytes) -> bool | None:
    """What the column-wise check says of one body, or None where polars refuses it."""
    bodies = pa.array([body], pa.binary())
    try:
        table = polars.read_avro(io.BytesIO(_avro_ocf.ocf_block(header, bodies))).to_arrow()
        if table.num_rows != 1:
            return None
        arrays = [
            _avro_fast.cast_exact(_avro_fast._one_chunk(table.column(i)), c.arrow)
            for i, c in enumerate(node.children)
        ]
        return _avro_fast._columns_exact(bodies, arrays, node)
    except (Exception, polars.exceptions.PanicException):
        return None


@settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    database=None,
)
@given(_cases(), st.lists(_corruption, min_size=1, max_size=6))
def test_the_walk_accepts_a_body_exactly_when_the_column_check_does(
    case: tuple[dict[str, Any], list[Any]], corruptions: list[tuple[int, int, int]]
) -> None:
    schema, records = case
    node = _node(schema)
    assume(_avro_fast.supported(node))
    header = _avro_fast.ocf_header(_avro_fast.ocf_schema_json(schema, {}))
    written = _write(schema, records)
    bodies = [_corrupt(written[i % len(written)], *c) for i, c in enumerate(corruptions)]
    walked = _walk(schema, bodies)
    for body, status in zip(bodies, walked.status.tolist(), strict=True):
        verdict = _columns_verdict(node, header, body)
        if verdict is None or status in (RANGE, INT_RANGE, PRECISION):
            # polars refuses it (then neither check is reached), or a value polars
            # reads as another one: a date, time or timestamp as null or one fastavro
            # refuses, an int beyond 32 bits wrapped, a decimal beyond its precision.
            # Without the walk such schemas take the exact path
            # (test_logical_values_out_of_range..., test_an_int_beyond_32_bits...)
            continue
        assert (status == OK) == verdict, (body, status)


def test_a_null_record_holding_a_uuid_passes_the_column_check() -> None:
    # polars leaves an empty string in the uuid field of a null record; nothing was
    # encoded for it, so it is not a non-canonical uuid (found by the property above).
    uuid_type = {"type": "string", "logicalType": "uuid"}
    inner = {"type": "record", "name": "Inner", "fields": [{"name": "id", "type": uuid_type}]}
    schema = {"type": "record", "name": "Outer", "fields": [{"name": "r", "type": [inner, "null"]}]}
    node = _node(schema)
    header = _avro_fast.ocf_header(_avro_fast.ocf_schema_json(schema, {}))
    null_branch = zz(1)
    assert _walk(schema, [null_branch]).status.tolist() == [OK]
    assert _columns_verdict(node, header, null_branch) is True


_DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}
_TWO_BOOLEANS_AND_A_LONG = {
    "type": "record",
    "name": "T",
    "fields": [
        {"name": "f0", "type": "boolean"},
        {"name": "f1", "type": "boolean"},
        {"name": "f2", "type": ["long", "null"]},
    ],
}


@pytest.mark.parametrize(
    ("schema", "body"),
    [
        # an empty decimal and a stray byte: polars reads 0, whose two bytes fill the body
        (_logical(_DECIMAL), zz(0) + b"\x00"),
        # a padded string length, then an empty decimal: the sizes add up, and the
        # decimal's length is looked for where the string's last byte (2) is
        (_field_pair("string", _DECIMAL), b"\x84\x00" + b"a\x02" + zz(0)),
        # a 10-byte varint past 64 bits: polars keeps its low 64 bits, which take 10 bytes
        (_TWO_BOOLEANS_AND_A_LONG, b"\x00\x00\x00" + b"\x80" * 9 + b"\x03"),
        (_field("long"), zz(7) + b"\xff" * 9 + b"\x03"),
        (_field("long"), zz(7) + b"\xff" * 9 + b"\x81\x00"),  # 11 bytes for 10
        # two blocks of 32 items take as many count bytes as one block of 64 (2)
        (
            _field({"type": "array", "items": "long"}),
            zz(7) + (zz(32) + zz(0) * 32) * 2 + zz(0),
        ),
    ],
    ids=[
        "empty-decimal",
        "padded-length-then-empty-decimal",
        "ten-byte-long-past-64-bits-nullable",
        "ten-byte-long-past-64-bits",
        "eleven-byte-long",
        "two-blocks-as-one",
    ],
)
def test_the_column_check_refuses_a_body_the_walk_refuses(
    schema: dict[str, Any], body: bytes
) -> None:
    node = _node(schema)
    header = _avro_fast.ocf_header(_avro_fast.ocf_schema_json(schema, {}))
    assert _one(schema, body)[0] != OK
    assert _columns_verdict(node, header, body) is not True


def test_without_the_extension_a_long_past_64_bits_is_a_malformed_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Never decoded silently to its low 64 bits (polars may read it so)."""
    schema = _TWO_BOOLEANS_AND_A_LONG
    good = _write(schema, [{"f0": True, "f1": False, "f2": 2**62}])[0]
    bad = b"\x00\x00\x00" + b"\x80" * 9 + b"\x03"
    native = AvroCodec(framing="none", schema=schema).decode_batch([good, bad])
    monkeypatch.setattr(_avro_walk, "NATIVE", False)
    monkeypatch.setattr(_avro_fast, "_said_columns", True)
    columns = AvroCodec(framing="none", schema=schema).decode_batch([good, bad])
    for result in (native, columns):
        assert result.batch.to_pylist() == [{"f0": True, "f1": False, "f2": 2**62}]
        assert [(f.index, f.kind) for f in result.errors] == [(1, FailureKind.MALFORMED)]
        assert "longer than 64 bits at byte 3" in result.errors[0].message


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(_cases(), st.lists(_corruption, min_size=1, max_size=8))
@example(  # a byte replaced in an infinite double: a NaN on either path
    case=(
        {
            "type": "record",
            "name": "Outer",
            "fields": [
                {
                    "name": "f0",
                    "type": {
                        "type": "array",
                        "items": {
                            "type": "record",
                            "name": "Inner",
                            "fields": [
                                {"name": "f0", "type": "double"},
                                {"name": "f1", "type": "boolean"},
                            ],
                        },
                    },
                }
            ],
        },
        [{"f0": [{"f0": math.inf, "f1": False}]}],
    ),
    corruptions=[(2, 1, 1)],
)
@example(  # the same in a map's value, read as a (key, value) pair
    case=(
        {
            "type": "record",
            "name": "Row",
            "fields": [{"name": "m", "type": {"type": "map", "values": "double"}}],
        },
        [{"m": {"a": math.inf}}],
    ),
    corruptions=[(2, 3, 1)],
)
@example(  # a zero byte inserted into an array of decimals: a layout that falls apart
    case=(
        {
            "type": "record",
            "name": "Row",
            "fields": [
                {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
                {
                    "name": "d",
                    "type": {
                        "type": "array",
                        "items": {
                            "type": "bytes",
                            "logicalType": "decimal",
                            "precision": 9,
                            "scale": 2,
                        },
                    },
                },
                {"name": "b", "type": "boolean"},
            ],
        },
        [{"e": "A", "d": [Decimal("0.00")], "b": False}],
    ),
    corruptions=[(3, 2, 0)],
)
def test_the_codec_decodes_and_rejects_alike_with_either_check(
    monkeypatch_module: pytest.MonkeyPatch,
    case: tuple[dict[str, Any], list[Any]],
    corruptions: list[tuple[int, int, int]],
) -> None:
    schema, records = case
    written = _write(schema, records)
    bodies = written + [_corrupt(written[i % len(written)], *c) for i, c in enumerate(corruptions)]
    native = AvroCodec(framing="none", schema=schema).decode_batch(bodies)
    monkeypatch_module.setattr(_avro_walk, "NATIVE", False)
    try:
        columns = AvroCodec(framing="none", schema=schema).decode_batch(bodies)
    finally:
        monkeypatch_module.setattr(_avro_walk, "NATIVE", True)
    assert native.batch.schema == columns.batch.schema
    assert _nan_free(native.batch.to_pylist()) == _nan_free(columns.batch.to_pylist())
    assert native.errors == columns.errors


def _nan_free(value: Any) -> Any:
    """``value`` with each float NaN as a marker: NaN is unequal to itself (Arrow's
    ``equals`` too), and a corrupted double decodes to one on either path."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, (list, tuple)):  # a map's entries are (key, value) tuples
        return [_nan_free(v) for v in value]
    if isinstance(value, dict):
        return {k: _nan_free(v) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    with pytest.MonkeyPatch.context() as mp:
        yield mp


# -- behaviour through the codec ----------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "value"),
    [
        ({"type": "int", "logicalType": "time-millis"}, 86_400_000),
        ({"type": "long", "logicalType": "time-micros"}, -1),
        ({"type": "long", "logicalType": "time-micros"}, 86_400_000_000),
        ({"type": "int", "logicalType": "date"}, 2_932_897),
        ({"type": "long", "logicalType": "timestamp-millis"}, 253_402_300_800_000),
        ({"type": "long", "logicalType": "local-timestamp-micros"}, -(2**63)),
    ],
)
def test_logical_values_out_of_range_decode_as_the_exact_path_decodes_them(
    t: dict[str, Any], value: int
) -> None:
    """polars reads such a value as null (or one fastavro refuses): never a silent null."""
    schema = _logical(t)
    bodies = [zz(value), zz(0)]
    fast = AvroCodec(framing="none", schema=schema).decode_batch(bodies)
    exact = AvroCodec(framing="none", schema=schema, engine="fastavro").decode_batch(bodies)
    assert fast.batch.equals(exact.batch)
    assert fast.errors == exact.errors
    assert fast.batch.column(0).null_count == 0


@pytest.mark.parametrize("engine", ["auto", "fastavro"])
@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 2**62])
def test_an_int_beyond_32_bits_is_a_malformed_row_on_every_engine(engine: str, value: int) -> None:
    """polars wrapped it into int32 silently; the exact path raised building the column."""
    schema = _field("int")
    bodies = [zz(1) + zz(value), zz(2) + zz(5)]
    result = AvroCodec(framing="none", schema=schema, engine=engine).decode_batch(bodies)  # type: ignore[arg-type]
    assert result.batch.to_pylist() == [{"id": 2, "v": 5}]
    assert [(f.index, f.kind) for f in result.errors] == [(0, FailureKind.MALFORMED)]
    assert "outside 32 bits at byte 1" in result.errors[0].message


def test_the_sample_orders_take_the_fast_path_and_a_bad_body_falls_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from thalweg_bytewax.dev.samples import ORDER_AVRO_SCHEMA, sample_orders  # noqa: PLC0415

    bodies = _write(ORDER_AVRO_SCHEMA, list(sample_orders(50, seed=5)))
    node = _node(ORDER_AVRO_SCHEMA)
    header = _avro_fast.ocf_header(json.dumps(ORDER_AVRO_SCHEMA))
    good = _avro_fast.decode_block(header, node, pa.array(bodies, pa.binary()))
    assert good is not None
    bad = [*bodies[:10], bodies[10][:-1], *bodies[11:]]
    assert _avro_fast.decode_block(header, node, pa.array(bad, pa.binary())) is None
    result = AvroCodec(framing="none", schema=ORDER_AVRO_SCHEMA).decode_batch(bad)
    assert [f.index for f in result.errors] == [10]
    assert result.batch.equals(pa.concat_batches([good.slice(0, 10), good.slice(11)]))
    with caplog.at_level(logging.WARNING):
        AvroCodec(framing="none", schema=ORDER_AVRO_SCHEMA).decode_batch(bodies)
    assert "not built" not in caplog.text


def test_without_the_extension_the_column_check_runs_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    schema = _field({"type": "array", "items": "string"})
    bodies = _write(schema, [{"id": k, "v": ["x"] * k} for k in range(5)])
    monkeypatch.setattr(_avro_walk, "NATIVE", False)
    monkeypatch.setattr(_avro_fast, "_said_columns", False)
    calls: list[int] = []
    real = _avro_fast._columns_exact

    def counted(*args: Any) -> bool:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(_avro_fast, "_columns_exact", counted)
    with caplog.at_level(logging.WARNING, logger="thalweg_bytewax.codecs._avro_fast"):
        result = AvroCodec(framing="none", schema=schema).decode_batch(bodies)
    assert result.errors == []
    assert result.batch.column("v").to_pylist() == [["x"] * k for k in range(5)]
    assert calls == [1]
    assert "native exactness walk is not built" in caplog.text
