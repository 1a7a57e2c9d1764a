"""The native duplicate finder marks exactly the rows Arrow's group-by marks.

Generated one-column keys of every type it hashes (strings, bytes of all widths,
integers, decimals, dates, instants, times, durations), with nulls, repeats, empty
values and sliced columns, against the group-by over the same batch.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.budget import examples
from thalweg_bytewax.contracts import duplicates
from thalweg_bytewax.contracts.duplicates import _grouped_duplicates, duplicate_mask

SMALL_TEXT = st.sampled_from(["", "a", "ab", "é", "a" * 9, "a" * 8 + "b", "x\x00y"]) | st.text(
    max_size=20
)
KEYS = [
    (pa.string(), SMALL_TEXT),
    (pa.large_string(), SMALL_TEXT),
    (pa.binary(), st.binary(max_size=17)),
    (pa.large_binary(), st.binary(max_size=3)),
    (pa.binary(16), st.binary(min_size=16, max_size=16) | st.just(b"\x00" * 16)),
    (pa.int8(), st.integers(-128, 127)),
    (pa.uint16(), st.integers(0, 3)),
    (pa.int32(), st.integers(-3, 3)),
    (pa.int64(), st.integers(-(2**63), 2**63 - 1) | st.integers(0, 3)),
    (pa.decimal128(12, 2), st.decimals(-5, 5, places=2)),
    (pa.date32(), st.dates(min_value=date(1999, 1, 1), max_value=date(1999, 1, 5))),
    (pa.timestamp("ms", tz="UTC"), st.integers(0, 4)),
    (pa.duration("s"), st.integers(-2, 2).map(lambda s: timedelta(seconds=s))),
    (pa.time64("us"), st.integers(0, 3)),
]


@st.composite
def columns(draw: st.DrawFn) -> pa.RecordBatch:
    t, values = draw(st.sampled_from(KEYS))
    n = draw(st.integers(0, 40))
    arr = pa.array(draw(st.lists(st.none() | values, min_size=n, max_size=n)), t)
    start = draw(st.integers(0, n))
    return pa.RecordBatch.from_arrays([arr.slice(start)], names=["k"])


@settings(max_examples=examples(400), deadline=None)
@given(columns())
def test_native_duplicates_are_the_group_by_duplicates(batch: pa.RecordBatch) -> None:
    native = duplicates._native_duplicates(batch.column(0))
    assert native is not None
    expected = _grouped_duplicates(batch, ["k"])
    assert native.tolist() == expected.tolist()
    assert duplicate_mask(batch, ["k"]).tolist() == expected.tolist()


def test_floats_and_several_columns_are_grouped_by_arrow(monkeypatch: pytest.MonkeyPatch) -> None:
    floats = pa.array([0.0, -0.0, float("nan"), float("nan"), None, None])
    assert duplicates._native_duplicates(floats) is None
    batch = pa.RecordBatch.from_pydict({"a": ["x", "x", "x", None], "b": [1, 2, 1, 1]})
    assert duplicate_mask(batch, ["a", "b"]).tolist() == [False, False, True, False]
    monkeypatch.setattr(duplicates, "_native", None)
    assert duplicate_mask(batch, ["a"]).tolist() == [False, True, True, False]


def test_a_large_column_of_repeated_keys() -> None:
    keys = pa.array([f"k{i % 1000}" if i % 7 else None for i in range(60_000)])
    batch = pa.RecordBatch.from_arrays([keys], names=["k"])
    assert np.array_equal(duplicate_mask(batch, ["k"]), _grouped_duplicates(batch, ["k"]))


def test_key_values_that_only_a_whole_compare_tells_apart() -> None:
    stamps = [datetime(2024, 1, 1), datetime(2024, 1, 1, 0, 0, 0, 1), datetime(2024, 1, 1)]
    batch = pa.RecordBatch.from_pydict(
        {
            "t": pa.array(stamps, pa.timestamp("us")),
            "d": pa.array([Decimal("1.00"), Decimal("1.01"), Decimal("1.00")], pa.decimal128(5, 2)),
        }
    )
    for name in ("t", "d"):
        assert duplicate_mask(batch, [name]).tolist() == [False, False, True]
