"""``thalweg dev produce``: the count lands, with the embedded sample's orders and timing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from confluent_kafka import Consumer, TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.budget import examples
from thalweg_bytewax.cli import main
from thalweg_bytewax.dev._orders_sample import SampleOrdersSource, sample_payload_at
from thalweg_bytewax.dev.samples import (
    encode_order_avro,
    order_key,
    sample_order_at,
    sample_orders_at,
)

SAMPLE_START_MS = 1_767_225_600_000  # 2026-01-01T00:00Z


def _watermarks(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in parts}
    finally:
        c.close()


@pytest.mark.heavy
def test_dev_produce_lands_every_order_with_the_sample_timing(kafka_bootstrap, make_topic, capsys):
    topic = make_topic()
    count = 100_000
    assert main(["dev", "produce", "--bootstrap", kafka_bootstrap, "--topic", topic,
                 "--count", str(count)]) == 0  # fmt: skip
    assert f"produced {count:,} sample orders" in capsys.readouterr().out
    marks = _watermarks(kafka_bootstrap, topic)
    assert sum(high - low for low, high in marks.values()) == count

    c = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "read", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in marks])
    seen = c.consume(500, timeout=10)
    c.close()
    assert seen
    payloads = {encode_order_avro(sample_order_at(7, i)): i for i in range(2_000)}
    matched = 0
    for m in seen:
        i = payloads.get(m.value() or b"")
        if i is None:
            continue  # an order past the first 2,000
        matched += 1
        # Created i x 100 ms after the sample's start, give or take two seconds.
        assert abs(m.timestamp()[1] - (SAMPLE_START_MS + i * 100)) <= 2_000
        assert m.key() == order_key(sample_order_at(7, i))
    assert matched > 0, "no produced record is one of the sample's first orders"


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 2**40), start=st.integers(0, 10**9), n=st.integers(1, 40))
def test_columnar_sample_orders_are_the_per_order_dicts_encoded(seed, start, n):
    indexes = range(start, start + n)
    payloads, keys, stamps = sample_orders_at(indexes, seed=seed)
    for j, i in enumerate(indexes):
        order = sample_order_at(seed, i)
        assert payloads[j] == encode_order_avro(order)
        assert keys[j] == order_key(order)
        created = order["created_at"]
        assert stamps[j] == int(created.timestamp() * 1000)
        assert abs(created - (created.min.replace(year=2026, tzinfo=created.tzinfo)
                              + timedelta(milliseconds=i * 100))) <= timedelta(seconds=2)  # fmt: skip


def test_embedded_sample_and_dev_produce_share_one_generator():
    source = SampleOrdersSource(40, partitions=4)
    part = source.build_part("in", "orders:1", None)
    _key, batch = part.next_batch()[0]
    values = batch.column("_twg_source_value").to_pylist()
    # Partition 1 holds orders 1, 5, 9, ...: the same bytes dev produce sends.
    produced, _, _ = sample_orders_at(range(1, 40, 4))
    assert values == produced == [sample_payload_at(7, i) for i in range(1, 40, 4)]
