"""The sink's offset reads wait for brokers the client forgot while all were away.

Once every broker is unreachable, librdkafka forgets the brokers it learnt and goes back
to its bootstrap servers; its metadata cache still names each partition's leader by a
broker id it no longer knows, so an offset read fails at once with
``_UNKNOWN_PARTITION``, as for a partition that does not exist. The sink's end-offset
and watermark reads wait for the brokers up to their bound instead (the only node
restarting comes back within it: ``tests/recovery/test_kafka_broker_restart.py``), and
a partition that the topic's metadata lacks still fails at once, named. The mock
cluster's process is stopped to take its only broker away.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, Producer

from thalweg_bytewax.connectors.kafka._sink_offsets import end_offsets, partition_watermarks
from thalweg_bytewax.errors import SinkTransientError
from thalweg_bytewax.testing import MockCluster

pytestmark = pytest.mark.slow

TOPIC = "out"
BOUND_S = 3.0
"""The reads' bound while the broker is gone: they must wait it out, not fail at once."""


@pytest.fixture
def reader() -> Iterator[tuple[MockCluster, Consumer]]:
    """A mock cluster whose topic holds 5 records per partition, and a reader of it."""
    cluster = MockCluster().start()
    consumer = None
    try:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
        for i in range(20):
            producer.produce(TOPIC, value=b"x", partition=i % 4)
        assert producer.flush(30) == 0
        consumer = Consumer(
            {"bootstrap.servers": cluster.bootstrap, "group.id": "unused", "log_level": 0}
        )
        yield cluster, consumer
    finally:
        if consumer is not None:
            consumer.close()
        cluster.stop()


def lose_the_only_broker(cluster: MockCluster, consumer: Consumer) -> None:
    """Stop the cluster once ``consumer`` knows its broker, and let it notice."""
    assert end_offsets(consumer, TOPIC, [0, 1, 2, 3], 30, "sink") == dict.fromkeys(range(4), 5)
    cluster.stop()
    time.sleep(1.0)  # the connection drops: every broker down, the client re-bootstraps


Read = Callable[[Consumer, float], object]
"""One of the sink's offset reads, given the consumer and when the read started."""

READS: dict[str, tuple[Read, str]] = {
    "end offsets": (
        lambda consumer, _: end_offsets(consumer, TOPIC, [0, 1, 2, 3], BOUND_S, "sink"),
        f"could not read the end offsets of topic `{TOPIC}` within 3 s",
    ),
    "watermarks": (
        lambda consumer, started: partition_watermarks(
            consumer, TOPIC, 0, started + BOUND_S, BOUND_S, "sink"
        ),
        f"could not read the watermarks of `{TOPIC}:0` within 3 s",
    ),
}


@pytest.mark.parametrize("name", sorted(READS))
def test_a_read_waits_for_a_forgotten_broker_up_to_its_bound(
    reader: tuple[MockCluster, Consumer], name: str
) -> None:
    read, expected = READS[name]
    cluster, consumer = reader
    lose_the_only_broker(cluster, consumer)
    started = time.monotonic()
    with pytest.raises(SinkTransientError) as failed:
        read(consumer, started)
    waited = time.monotonic() - started
    assert waited >= BOUND_S - 0.5, f"failed after {waited:.1f} s: {failed.value}"
    message = str(failed.value)
    assert expected in message
    assert "`unreachable_timeout`" in message


def test_a_partition_the_topic_lacks_fails_at_once_named(
    reader: tuple[MockCluster, Consumer],
) -> None:
    _, consumer = reader
    started = time.monotonic()
    with pytest.raises(SinkTransientError) as failed:
        end_offsets(consumer, TOPIC, [7], 60, "sink")
    assert time.monotonic() - started < 10
    message = str(failed.value)
    assert f"topic `{TOPIC}` has no partition 7" in message
    assert "_UNKNOWN_PARTITION" in message
