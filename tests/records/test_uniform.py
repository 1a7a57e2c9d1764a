"""``all_equal``: the once-a-batch check that a batch holds one source partition."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.records.uniform import all_equal

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
