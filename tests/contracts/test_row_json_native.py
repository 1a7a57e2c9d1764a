"""The native row JSON writer writes exactly the column-wise (and per-row orjson) text.

Differential tests over generated Arrow batches: nested lists, large and fixed-size
lists, structs, maps, dictionaries, nulls at every
level, unicode and every control character, non-finite floats, decimals of several
scales, instants and dates of every unit and zone, bytes, and arrays whose children
start at an offset; each batch sliced, and rows picked in any order with repeats.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.budget import examples
from thalweg_bytewax.contracts import _row_json_columns, _row_json_native, row_json
from thalweg_bytewax.contracts.row_json import rows_as_json, value_json

FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, 1e16, 1e-7, 5e-324, 1e22, 0.1, float("nan"), float("-inf")]
)
TEXT = st.text(max_size=12) | st.sampled_from(
    ['"', "\\", "\n\t\r\b\f", "\x00\x01\x1f\x7f", "é🚀", "\u2028/", "a" * 17 + '"' + "b" * 9]
)
STAMPS = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30))
TOKYO = ZoneInfo("Asia/Tokyo")


def _stamp(unit: str) -> st.SearchStrategy[datetime]:
    if unit == "s":
        return STAMPS.map(lambda d: d.replace(microsecond=0))
    if unit == "ms":
        return STAMPS.map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))
    return STAMPS


def _leaf() -> st.SearchStrategy[tuple[pa.DataType, st.SearchStrategy[Any]]]:
    ints = [
        (t, st.integers(-(2 ** (t.bit_width - 1)), 2 ** (t.bit_width - 1) - 1))
        for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64())
    ] + [
        (t, st.integers(0, 2**t.bit_width - 1))
        for t in (pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64())
    ]
    decimals = [
        (pa.decimal128(p, s), st.decimals(-(10 ** (p - s)) + 1, 10 ** (p - s) - 1, places=s))
        for p, s in ((5, 0), (12, 2), (20, 6), (38, 3), (38, 0), (20, 8))
    ] + [(pa.decimal256(40, 4), st.decimals(-(10**9), 10**9, places=4))]
    stamps = (
        [(pa.timestamp(u), _stamp(u)) for u in ("s", "ms", "us")]
        + [
            (pa.timestamp(u, tz="UTC"), _stamp(u).map(lambda d: d.replace(tzinfo=UTC)))
            for u in ("s", "ms", "us")
        ]
        + [
            (pa.timestamp("us", tz="Etc/UTC"), STAMPS.map(lambda d: d.replace(tzinfo=UTC))),
            (pa.timestamp("us", tz="Asia/Tokyo"), STAMPS.map(lambda d: d.replace(tzinfo=TOKYO))),
        ]
    )
    others = [
        (pa.bool_(), st.booleans()),
        (pa.float64(), FLOATS),
        (pa.float32(), st.floats(width=32)),
        (pa.string(), TEXT),
        (pa.large_string(), TEXT),
        (pa.binary(), st.binary(max_size=6)),
        (pa.large_binary(), st.binary(max_size=6)),
        (pa.binary(3), st.binary(min_size=3, max_size=3)),
        (pa.date32(), st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31))),
        (pa.date64(), st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31))),
        (pa.time64("us"), st.times()),
        (
            pa.duration("ms"),
            st.integers(-(10**9), 10**9).map(lambda ms: timedelta(milliseconds=ms)),
        ),
        (pa.null(), st.none()),
        (pa.dictionary(pa.int8(), pa.string()), TEXT),
    ]
    return st.sampled_from(ints + decimals + stamps + others)


def _nested(
    inner: st.SearchStrategy[tuple[pa.DataType, st.SearchStrategy[Any]]],
) -> st.SearchStrategy[tuple[pa.DataType, st.SearchStrategy[Any]]]:
    def lists(kind: str) -> Any:
        def build(item: tuple[pa.DataType, st.SearchStrategy[Any]]) -> Any:
            t, values = item
            maybe = st.none() | values
            if kind == "fixed":
                return pa.list_(t, 2), st.lists(maybe, min_size=2, max_size=2)
            made = pa.large_list(t) if kind == "large" else pa.list_(t)
            return made, st.lists(maybe, max_size=3)

        return inner.map(build)

    def structs(fields: list[tuple[pa.DataType, st.SearchStrategy[Any]]], names: list[str]) -> Any:
        t = pa.struct([(n, f[0]) for n, f in zip(names, fields, strict=True)])
        return t, st.fixed_dictionaries(
            {n: st.none() | f[1] for n, f in zip(names, fields, strict=True)}
        )

    struct = st.lists(inner, min_size=1, max_size=3).flatmap(
        lambda fields: st.lists(
            st.sampled_from(["a", "b", 'q"', "é\n"]),
            min_size=len(fields),
            max_size=len(fields),
            unique=True,
        ).map(lambda names: structs(fields, names))
    )
    maps = inner.map(
        lambda item: (
            pa.map_(pa.string(), item[0]),
            st.lists(st.tuples(TEXT, st.none() | item[1]), max_size=2),
        )
    )
    nested: st.SearchStrategy[tuple[pa.DataType, st.SearchStrategy[Any]]] = (
        lists("list") | lists("large") | lists("fixed") | struct | maps
    )
    return nested


TYPES = st.recursive(_leaf(), _nested, max_leaves=6)


def _with_shifted_children(arr: pa.Array) -> pa.Array:
    """The same values, a list's child array starting at an offset of its own."""
    if not pa.types.is_list(arr.type) or arr.null_count:
        return arr
    pad = pa.nulls(2, arr.type.value_type)
    values = pa.concat_arrays([pad, arr.values.slice(int(arr.offsets[0].as_py()))]).slice(2)
    offsets = pa.array(np.asarray(arr.offsets.to_numpy()) - int(arr.offsets[0].as_py()), pa.int32())
    return pa.ListArray.from_arrays(offsets, values, type=arr.type)


@st.composite
def batches(draw: st.DrawFn) -> pa.RecordBatch:
    width = draw(st.integers(1, 4))
    n = draw(st.integers(0, 7))
    arrays, names = [], []
    for k in range(width):
        t, values = draw(TYPES)
        arr = pa.array(draw(st.lists(st.none() | values, min_size=n, max_size=n)), t)
        if draw(st.booleans()):
            arr = _with_shifted_children(arr)
        arrays.append(arr)
        names.append(f"c{k}")
    batch = pa.RecordBatch.from_arrays(arrays, names=names)
    start = draw(st.integers(0, n))
    return batch.slice(start, draw(st.integers(0, n - start)))


def test_the_native_writer_is_built() -> None:
    assert row_json.NATIVE, (
        "the native row JSON writer is not built: pip install -e . with a C compiler"
    )


def test_without_the_native_writer_the_column_wise_path_writes_the_same_text(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    batch = pa.RecordBatch.from_pydict(
        {"s": ["a", 'b"', None], "d": pa.array([Decimal("1.50"), None, Decimal("-2.00")])}
    )
    rows = np.array([2, 0, 2], np.int64)
    native = rows_as_json(batch, rows).to_pylist()
    monkeypatch.setattr(row_json, "_native", None)
    monkeypatch.setattr(row_json, "_announced", False)
    with caplog.at_level("WARNING", logger=row_json.__name__):
        assert rows_as_json(batch, rows).to_pylist() == native == _expected(batch, rows)
    assert "native writer was not built" in caplog.text


def _expected(batch: pa.RecordBatch, rows: np.ndarray | None) -> list[str]:
    taken = batch if rows is None else batch.take(pa.array(rows, pa.int64()))
    return [value_json(r) for r in taken.to_pylist()]


@settings(max_examples=examples(400), deadline=None)
@given(batches(), st.data())
def test_native_rows_are_the_per_row_orjson_text(
    batch: pa.RecordBatch, data: st.DataObject
) -> None:
    rows = None
    if batch.num_rows and data.draw(st.booleans()):
        rows = np.array(
            data.draw(st.lists(st.integers(0, batch.num_rows - 1), max_size=8)), np.int64
        )
    expected = _expected(batch, rows)
    native = _row_json_native.native_rows(batch, rows)
    assert native is not None
    assert native.to_pylist() == expected
    assert rows_as_json(batch, rows).to_pylist() == expected
    taken = batch if rows is None else batch.take(pa.array(rows, pa.int64()))
    assert _row_json_columns.columnwise_rows(taken).to_pylist() == expected


def test_escapes_every_control_character_as_orjson_does() -> None:
    text = "".join(chr(c) for c in range(0x80)) + '"\\é\u2028' + "x" * 20
    batch = pa.RecordBatch.from_pydict({"s": [text, text[5:], text[:9]]})
    assert rows_as_json(batch).to_pylist() == _expected(batch, None)


def test_decimals_keep_every_digit_of_128_bits() -> None:
    top = 10**38 - 1
    values = [Decimal(top), Decimal(-top), Decimal(2**64), Decimal(-(2**64) - 1), Decimal(0)]
    batch = pa.RecordBatch.from_pydict({"d": pa.array(values, pa.decimal128(38, 0))})
    assert rows_as_json(batch).to_pylist() == _expected(batch, None)
    scaled = [Decimal("-0.000001"), Decimal("0.000000"), Decimal("12.500000"), None]
    batch = pa.RecordBatch.from_pydict({"d": pa.array(scaled, pa.decimal128(20, 6))})
    assert rows_as_json(batch).to_pylist() == _expected(batch, None)


def test_instants_at_the_ends_of_the_calendar() -> None:
    stamps = [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=UTC),
        datetime(1600, 2, 29, 12, tzinfo=UTC),
    ]
    days = [date(1, 1, 1), date(9999, 12, 31), date(1969, 12, 31), date(2000, 2, 29)]
    batch = pa.RecordBatch.from_pydict(
        {"t": pa.array(stamps, pa.timestamp("us", tz="UTC")), "d": pa.array(days, pa.date32())}
    )
    assert _row_json_native.native_rows(batch, None) is not None
    assert rows_as_json(batch).to_pylist() == _expected(batch, None)


@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 86_399_999)), max_size=40))
def test_instants_and_dates_of_runs_of_the_same_day_are_each_their_own(
    moves: list[tuple[int, int]],
) -> None:
    # A stream's rows mostly share a day, which the writer keeps the text of; dates and
    # instants interleave, and a day may come back after another.
    start = datetime(2026, 3, 1, tzinfo=UTC)
    days = np.cumsum([0] + [d for d, _ in moves])[1:]
    stamps = [
        start + timedelta(days=int(d), milliseconds=ms)
        for d, (_, ms) in zip(days, moves, strict=True)
    ]
    on = [(s - timedelta(days=int(d) % 2)).date() for s, d in zip(stamps, days, strict=True)]
    batch = pa.RecordBatch.from_pydict(
        {"at": pa.array(stamps, pa.timestamp("ms", tz="UTC")), "on": pa.array(on, pa.date32())}
    )
    native = _row_json_native.native_rows(batch, None)
    assert native is not None and native.to_pylist() == _expected(batch, None)


def test_an_instant_past_year_9999_goes_to_the_column_wise_path() -> None:
    far = pa.array([0, 2**62], pa.timestamp("us"))
    batch = pa.RecordBatch.from_pydict({"t": far, "s": ["a", "b"]})
    rows = np.array([0], np.int64)
    # Rows that are not asked for are never read.
    assert rows_as_json(batch, rows).to_pylist() == ['{"t":"1970-01-01T00:00:00","s":"a"}']
    assert _row_json_native.native_rows(batch, None) is None
    with pytest.raises((OverflowError, ValueError)):
        _row_json_columns.columnwise_rows(batch)
    with pytest.raises((OverflowError, ValueError)):
        rows_as_json(batch)


def test_rows_outside_the_batch_are_refused_by_name() -> None:
    batch = pa.RecordBatch.from_pydict({"s": ["a", "b"]})
    with pytest.raises(IndexError, match=r"0\.\.1 .* got 0\.\.2"):
        rows_as_json(batch, np.array([0, 2]))
    with pytest.raises(IndexError, match="got -1"):
        rows_as_json(batch, np.array([-1]))


def test_text_past_the_first_guess_grows_the_buffer() -> None:
    long = "é" * 5000 + '"' * 3000
    batch = pa.RecordBatch.from_pydict({"s": [long] * 40, "t": [time(1, 2, 3)] * 40})
    assert rows_as_json(batch).to_pylist() == _expected(batch, None)
    assert rows_as_json(batch, np.array([39, 0, 0])).to_pylist() == _expected(
        batch, np.array([39, 0, 0])
    )
