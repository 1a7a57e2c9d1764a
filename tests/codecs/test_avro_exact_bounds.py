"""Bodies no Avro reader may take on trust end as DLQ rows, on every engine, with or without C.

fastavro (the exact path) loops for ever on a block of 2**62 items that take no byte,
reads a time of -1 as a time of day, and returns ints and decimals no Arrow column
holds; polars stores a decimal beyond its precision as it is. The walk (native, else its
Python twin) refuses such a body before any reader sees it, so each is one ``malformed``
row naming what is wrong, and ``decode_batch`` never raises for a bad body.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import fastavro
import polars
import pyarrow as pa
import pytest

import thalweg_bytewax.operators as twg
from tests.codecs.avro_wire import zz
from tests.helpers import locator_of, raw_values, run_flow
from thalweg_bytewax.codecs import _avro_fast, _avro_walk
from thalweg_bytewax.codecs.avro import AvroCodec, AvroDecodeError
from thalweg_bytewax.codecs.base import FailureKind
from thalweg_bytewax.lanes.dlq import rejected_from_dlq_batch


@pytest.fixture(params=["auto", "fastavro", "pure"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The polars path, the exact path, and both without the C extension (``pure``)."""
    if request.param == "pure":
        monkeypatch.setattr(_avro_walk, "NATIVE", False)
        yield "auto"
    else:
        assert _avro_walk.NATIVE, "the native walk is not built: pip install -e . with a C compiler"
        yield request.param


def _codec(schema: dict[str, Any], engine: str) -> AvroCodec:
    return AvroCodec(framing="none", schema=schema, engine=engine)  # type: ignore[arg-type]


def _record(*fields: tuple[str, Any]) -> dict[str, Any]:
    return {
        "type": "record",
        "name": "Row",
        "fields": [{"name": n, "type": t} for n, t in fields],
    }


def _write(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return buf.getvalue()


# -- a block of items that take no byte ---------------------------------------------------


class _Reached(BaseException):
    """A reader was handed the hostile body (a BaseException: nothing catches it)."""


_EMPTY = {"type": "record", "name": "E", "fields": []}
_HOSTILE_COUNT = zz(2**62)


@pytest.fixture
def guarded(monkeypatch: pytest.MonkeyPatch) -> None:
    """fastavro and polars refuse the hostile body loudly instead of looping on it."""
    real_reader = fastavro.schemaless_reader
    real_polars = polars.read_avro

    def reader(buf: io.BytesIO, *args: Any, **kwargs: Any) -> Any:
        if _HOSTILE_COUNT in buf.getvalue():
            raise _Reached("fastavro was handed a block of 2**62 empty records")
        return real_reader(buf, *args, **kwargs)

    def read_avro(source: io.BytesIO, *args: Any, **kwargs: Any) -> Any:
        if _HOSTILE_COUNT in source.getvalue():
            raise _Reached("polars was handed a block of 2**62 empty records")
        return real_polars(source, *args, **kwargs)

    monkeypatch.setattr(fastavro, "schemaless_reader", reader)
    monkeypatch.setattr(polars, "read_avro", read_avro)


@pytest.mark.usefixtures("guarded")
@pytest.mark.parametrize(
    ("t", "hostile"),
    [
        ({"type": "array", "items": _EMPTY}, _HOSTILE_COUNT + b"\x00"),
        (
            {"type": "array", "items": {"type": "array", "items": _EMPTY}},
            zz(1) + _HOSTILE_COUNT + b"\x00\x00",
        ),
        (["null", {"type": "array", "items": _EMPTY}], zz(1) + _HOSTILE_COUNT + b"\x00"),
    ],
    ids=["array", "nested", "nullable"],
)
def test_a_block_of_endless_empty_items_is_a_dlq_row_never_read(
    engine: str, t: Any, hostile: bytes
) -> None:
    """fastavro (and polars) read 2**62 records of no field one by one: a worker hung."""
    schema = _record(("id", "long"), ("a", t))
    hostile = zz(1) + hostile
    good = _write(schema, {"id": 2, "a": []})
    result = _codec(schema, engine).decode_batch([hostile, good])
    assert result.batch.column("id").to_pylist() == [2]
    assert [(f.index, f.kind) for f in result.errors] == [(0, FailureKind.MALFORMED)]
    assert "a block count more than the bytes left can hold at byte" in result.errors[0].message
    with pytest.raises(AvroDecodeError, match="block count more than the bytes left"):
        _codec(schema, engine).decode_value(hostile)


# -- decimals beyond their precision ----------------------------------------------------------


_DECIMALS = [
    ({"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 0}, zz(2) + b"\x01\x00"),
    (
        {"type": "fixed", "name": "D", "size": 2, "logicalType": "decimal", "precision": 2},
        b"\xff\x9c",  # -100
    ),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2},
        zz(2) + (10_000).to_bytes(2, "big", signed=True),
    ),
]


@pytest.mark.parametrize(("t", "bad"), _DECIMALS, ids=["bytes", "fixed", "scaled"])
def test_a_decimal_beyond_its_precision_is_a_dlq_row_naming_field_and_precision(
    engine: str, t: dict[str, Any], bad: bytes
) -> None:
    """polars kept 256 in decimal(2, 0) as it is; the exact path raised ArrowInvalid."""
    schema = _record(("id", "long"), ("price", t))
    good = _write(schema, {"id": 2, "price": Decimal(-99).scaleb(-t.get("scale", 0))})
    result = _codec(schema, engine).decode_batch([zz(1) + bad, good])
    result.batch.validate(full=True)
    assert result.batch.to_pylist() == [{"id": 2, "price": Decimal(-99).scaleb(-t.get("scale", 0))}]
    assert [(f.index, f.kind) for f in result.errors] == [(0, FailureKind.MALFORMED)]
    precision, scale = t["precision"], t.get("scale", 0)
    message = result.errors[0].message
    assert f"field `price` (decimal({precision}, {scale}))" in message
    assert "more digits than its precision at byte 1" in message


def test_a_nested_decimal_beyond_its_precision_names_its_path(engine: str) -> None:
    t = {"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 0}
    line = {"type": "record", "name": "Line", "fields": [{"name": "q", "type": t}]}
    schema = _record(("lines", {"type": "array", "items": line}))
    body = zz(2) + zz(1) + b"\x05" + zz(2) + b"\x01\x00" + b"\x00"  # [5, 256]
    result = _codec(schema, engine).decode_batch([body])
    assert result.batch.num_rows == 0
    assert "field `lines[].q` (decimal(2, 0))" in result.errors[0].message


def test_a_wide_decimal_beyond_its_precision_is_a_dlq_row_not_an_exception(engine: str) -> None:
    """decimal(20, 0) and decimal(40, 0) (decimal256): the exact path raised building them."""
    t20 = {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 0}
    t40 = {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 0}
    schema = _record(("id", "long"), ("big", t20), ("huge", t40))

    def body(i: int, big: int, huge: int) -> bytes:
        return b"".join(
            [zz(i), zz(9), big.to_bytes(9, "big", signed=True), zz(17)]
            + [huge.to_bytes(17, "big", signed=True)]
        )

    bodies = [body(1, 10**20, 1), body(2, 10**19, 10**40), body(3, 10**19, 10**39)]
    result = _codec(schema, engine).decode_batch(bodies)
    assert result.batch.to_pylist() == [{"id": 3, "big": Decimal(10**19), "huge": Decimal(10**39)}]
    assert [(f.index, f.kind) for f in result.errors] == [(0, FailureKind.MALFORMED)] + [
        (1, FailureKind.MALFORMED)
    ]
    assert "field `big` (decimal(20, 0)) holds a decimal with more digits" in (
        result.errors[0].message
    )
    # past 38 digits the walk leaves the check to the column build, which names the field
    assert "field `huge` holds a value its type decimal256(40, 0) cannot hold" in (
        result.errors[1].message
    )


# -- times outside a day, dates and ints without the extension ------------------------------------


@pytest.mark.parametrize(
    ("t", "value"),
    [
        ({"type": "int", "logicalType": "time-millis"}, -1),
        ({"type": "long", "logicalType": "time-micros"}, -1),
        ({"type": "int", "logicalType": "time-millis"}, 86_400_000),
        ({"type": "long", "logicalType": "time-micros"}, 86_400_000_000),
        ({"type": "int", "logicalType": "date"}, 2_932_897),
        ({"type": "long", "logicalType": "timestamp-millis"}, 2**62),
    ],
)
def test_a_time_date_or_timestamp_out_of_range_is_a_dlq_row(
    engine: str, t: dict[str, Any], value: int
) -> None:
    """fastavro read a time of -1 as 00:00:00.999; polars a date out of range as null."""
    schema = _record(("id", "long"), ("at", t))
    result = _codec(schema, engine).decode_batch([zz(1) + zz(value), zz(2) + zz(5)])
    assert result.batch.column("id").to_pylist() == [2]
    assert result.batch.column("at").null_count == 0
    assert [(f.index, f.kind) for f in result.errors] == [(0, FailureKind.MALFORMED)]
    assert "field `at` (" in result.errors[0].message
    assert "outside the range every reader converts at byte 1" in result.errors[0].message


@pytest.mark.parametrize(
    "first",
    [
        # (the field, its type, a byte fastavro reads leniently, a good one)
        ("flag", "boolean", b"\x02", b"\x01"),  # fastavro reads 2 as true
        ("pick", ["null", "long"], zz(-1), zz(0)),  # fastavro reads branch -1 as the last
        ("code", {"type": "enum", "name": "C", "symbols": ["A", "B"]}, zz(-1), zz(1)),
    ],
    ids=["boolean", "branch", "enum"],
)
@pytest.mark.parametrize("value", [2**31, 2**40, -(2**62)])
def test_an_int_beyond_32_bits_after_a_byte_fastavro_tolerates_is_a_dlq_row(
    engine: str, first: tuple[str, Any, bytes, bytes], value: int
) -> None:
    """The exact path raised building the int32 column: decode_batch never raises for data."""
    name, t, tolerated, fine = first
    schema = _record(("id", "long"), (name, t), ("n", "int"))
    ok = zz(2) + fine + zz(3)
    result = _codec(schema, engine).decode_batch([zz(1) + tolerated + zz(value), ok])
    assert result.batch.column("n").to_pylist() == [3]
    assert [(f.index, f.kind) for f in result.errors] == [(0, FailureKind.MALFORMED)]
    assert "at byte 1 of" in result.errors[0].message


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_without_the_extension_an_int_is_not_wrapped(
    monkeypatch: pytest.MonkeyPatch, value: int
) -> None:
    """polars wraps 2**31 into -2**31, taking as many bytes: the column check cannot see it."""
    monkeypatch.setattr(_avro_walk, "NATIVE", False)
    schema = _record(("id", "long"), ("n", "int"))
    result = _codec(schema, "auto").decode_batch([zz(1) + zz(value), zz(2) + zz(-5)])
    assert result.batch.to_pylist() == [{"id": 2, "n": -5}]
    assert "an `int` holds a value outside 32 bits at byte 1" in result.errors[0].message
    assert _avro_fast._values_unchecked(_node(schema))


def _node(schema: dict[str, Any]) -> Any:
    return AvroCodec(framing="none", schema=schema)._schemas.writers["fixed"].node


def test_the_python_walk_agrees_with_the_native_one_on_every_reason() -> None:
    """The walk without C reports the status, offset and field of the native one."""
    from tests.codecs.test_avro_walk import REASONS, _field  # noqa: PLC0415
    from thalweg_bytewax.codecs._avro_walk_py import walk_py  # noqa: PLC0415

    for t, tail, _, _ in REASONS:
        node = _node(_field(t))
        code = _avro_walk.program(node)
        assert code is not None
        bodies = pa.array([zz(7) + tail, zz(7)], pa.binary())
        native = _avro_walk.walk(code, bodies, canonical=False)
        assert native is not None
        python = walk_py(code, bodies)
        assert (native.bad, native.first) == (python.bad, python.first), t
        for a, b in ((native.status, python.status), (native.where, python.where)):
            assert a.tolist() == b.tolist(), t
        assert native.op.tolist() == python.op.tolist(), t


# -- through a flow: the DLQ row names the record ------------------------------------------------------


def test_each_refused_body_reaches_the_dlq_with_its_locator_and_reason() -> None:
    dec = {"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 0}
    schema = _record(
        ("price", dec),
        ("at", {"type": "int", "logicalType": "time-millis"}),
        ("a", {"type": "array", "items": _EMPTY}),
    )
    codec = AvroCodec(framing="none", schema=schema)
    good = zz(1) + b"\x05" + zz(7) + b"\x00"
    values = [
        good,
        zz(2) + b"\x01\x00" + zz(7) + b"\x00",  # 256 in decimal(2, 0)
        zz(1) + b"\x05" + zz(-1) + b"\x00",  # a time of -1
        zz(1) + b"\x05" + zz(7) + _HOSTILE_COUNT + b"\x00",  # 2**62 empty records
        good,
    ]
    out = run_flow(
        [("orders:1", raw_values(values, partition=1, first=10))],
        lambda up: twg.decode("decode", up, codec),
        flow_id="avro_refused",
    )
    assert [b.num_rows for _, b in out["ok"]] == [2]
    got = {locator_of(r).offset: r for r in rejected_from_dlq_batch(out["rejected"][0][1])}
    assert sorted(got) == [11, 12, 13]
    texts = {
        11: "field `price` (decimal(2, 0)) holds a decimal with more digits than its precision",
        12: "field `at` (time32[ms], from 0 to 86399999) holds a date, time or timestamp",
        13: "a block count more than the bytes left can hold",
    }
    for offset, r in got.items():
        assert r.reason == "decode" and r.raw_value == values[offset - 10]
        assert locator_of(r).topic == "orders" and locator_of(r).partition == 1
        assert r.message.startswith(f"avro decode failed at `orders:1@{offset}` (malformed): ")
        assert texts[offset] in r.message
