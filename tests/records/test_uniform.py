"""``all_equal``: the once-a-batch check that a batch holds one source partition."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.records.uniform import all_equal, int_bounds

_TEXT = st.text(alphabet="ab\u00e9", max_size=3)


def _reference(array: pa.Array) -> bool:
    if len(array) <= 1:
        return True
    if array.null_count:
        return bool(array.null_count == len(array))
    return bool(pc.all(pc.equal(array, array[0])).as_py())


@given(
    values=st.lists(st.one_of(st.none(), _TEXT), max_size=8),
    start=st.integers(0, 8),
    length=st.integers(0, 8),
    large=st.booleans(),
)
def test_strings_agree_with_arrow_equal_on_any_slice(
    values: list[str | None], start: int, length: int, large: bool
) -> None:
    array = pa.array(values, pa.large_string() if large else pa.string())
    sliced = array.slice(min(start, len(array)), length)
    assert all_equal(sliced) == _reference(sliced)


@given(values=st.lists(st.one_of(st.none(), st.integers(-3, 3)), max_size=8))
def test_integers_agree_with_arrow_equal(values: list[int | None]) -> None:
    array = pa.array(values, pa.int32())
    assert all_equal(array) == _reference(array)


def test_same_length_different_strings_are_unequal() -> None:
    # equal lengths, so only the bytes can tell them apart
    assert not all_equal(pa.array(["orders", "orderz", "orders"]))
    assert all_equal(pa.array(["orders"] * 3))


_INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint32(), pa.uint64()]


@given(
    values=st.lists(st.integers(0, 100), min_size=1, max_size=8),
    start=st.integers(0, 7),
    length=st.integers(1, 8),
    index=st.integers(0, len(_INT_TYPES) - 1),
)
def test_integer_slices_agree_with_arrow_equal(
    values: list[int], start: int, length: int, index: int
) -> None:
    # read on the values buffer: a slice's offset must be honoured
    array = pa.array(values, _INT_TYPES[index])
    sliced = array.slice(min(start, len(array) - 1), length)
    assert all_equal(sliced) == _reference(sliced)


@given(
    values=st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=8),
    start=st.integers(0, 7),
    length=st.integers(1, 8),
)
def test_int_bounds_agree_with_arrow_min_max_on_any_slice(
    values: list[int], start: int, length: int
) -> None:
    array = pa.array(values, pa.int64())
    sliced = array.slice(min(start, len(array) - 1), length)
    bounds = pc.min_max(sliced)
    assert int_bounds(sliced) == (bounds["min"].as_py(), bounds["max"].as_py())


def test_int_bounds_skip_nulls_and_refuse_a_column_without_values() -> None:
    assert int_bounds(pa.array([None, 7, 3, None], pa.int32())) == (3, 7)
    assert int_bounds(pa.array([2**64 - 1, 0], pa.uint64())) == (0, 2**64 - 1)
    with pytest.raises(ValueError, match="non-null value"):
        int_bounds(pa.array([None, None], pa.int64()))
    with pytest.raises(ValueError, match="non-null value"):
        int_bounds(pa.array([], pa.int64()))
