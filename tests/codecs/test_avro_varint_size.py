"""The fast path's varint sizes equal the length of Avro's zigzag varint encoding."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.codecs._avro_sizes import zz_size


def _encoded_length(v: int) -> int:
    z = ((v << 1) ^ (v >> 63)) & (2**64 - 1)
    n = 1
    while z >= 0x80:
        z >>= 7
        n += 1
    return n


_long = st.integers(-(2**63), 2**63 - 1)


@given(
    values=st.one_of(
        st.lists(st.integers(-200, 200), max_size=40),  # the one- and two-byte shortcut
        st.lists(_long, max_size=40),
    )
)
def test_sizes_match_encoding(values: list[int]) -> None:
    got = zz_size(np.array(values, dtype=np.int64))
    assert got.tolist() == [_encoded_length(v) for v in values]
