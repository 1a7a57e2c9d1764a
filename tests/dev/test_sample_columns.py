"""The columnar sample orders encode the same bytes as the dict an index reads back as."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.budget import examples
from thalweg_bytewax.dev.samples import (
    encode_order_avro,
    order_key,
    sample_order_at,
    sample_orders_at,
)


@settings(max_examples=examples(100), deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**31),
    indexes=st.lists(st.integers(min_value=0, max_value=10**9), min_size=1, max_size=8),
)
def test_a_columnar_range_and_one_order_as_a_dict_agree_byte_for_byte(
    seed: int, indexes: list[int]
) -> None:
    payloads, keys, _ = sample_orders_at(indexes, seed=seed)
    for index, payload, key in zip(indexes, payloads, keys, strict=True):
        order = sample_order_at(seed, index)
        assert payload == encode_order_avro(order)
        assert key == order_key(order)
