"""The varint sizes' shortcuts (one size for a whole column, a few limits between its
extremes) equal the per-value encoding length, around every size boundary."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tests.codecs.test_avro_varint_size import _encoded_length
from thalweg_bytewax.codecs._avro_sizes import zz_size

# Values near each boundary of the zigzag varint sizes (2^(7k) / 2), of either sign.
_boundary = st.sampled_from([0, *[1 << (7 * k - 1) for k in range(1, 10)]])


@given(
    base=_boundary,
    sign=st.sampled_from([1, -1]),
    offsets=st.lists(st.integers(-300, 300), min_size=1, max_size=40),
)
def test_sizes_of_values_around_one_magnitude_match_encoding(
    base: int, sign: int, offsets: list[int]
) -> None:
    values = [max(-(2**63), min(2**63 - 1, sign * base + o)) for o in offsets]
    got = zz_size(np.array(values, dtype=np.int64))
    assert got.tolist() == [_encoded_length(v) for v in values]


@given(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=40))
def test_sizes_of_int32_input_match_encoding(values: list[int]) -> None:
    got = zz_size(np.array(values, dtype=np.int32))
    assert got.tolist() == [_encoded_length(v) for v in values]
