"""A bounded Kafka run whose brokers die mid-run ends in a clear error, in bounded time.

librdkafka retries an unreachable broker forever, so a bounded run (``tail=False``)
short of its end offsets used to poll for ever without an error. With
``unreachable_timeout`` the partition fails with a ``SourceError`` naming itself, the
offset it stopped at and the option, once it has read nothing for that long while the
client reports the brokers unreachable. The mock cluster's process is killed mid-run.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from confluent_kafka import Producer

from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.errors import ConfigError, SourceError
from thalweg_bytewax.testing import MockCluster

RECORDS = 2_000
SMALL_FETCHES = {
    # Fetch and prefetch little, so most records are still on the broker when it dies.
    "queued.max.messages.kbytes": 64,
    "fetch.max.bytes": 65_536,
    "max.partition.fetch.bytes": 65_536,
    "message.max.bytes": 65_536,
}
GUARD_S = 120.0
"""Only a guard against a hang: the bound under test is one second."""


@pytest.mark.slow
def test_a_bounded_run_fails_when_the_brokers_stay_unreachable() -> None:
    cluster = MockCluster().start()
    try:
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        for _ in range(RECORDS):
            producer.produce("orders", value=b"x" * 1_000, partition=0)
        assert producer.flush(30) == 0
        source = KafkaSource(
            [cluster.bootstrap],
            ["orders"],
            tail=False,
            librdkafka=SMALL_FETCHES,
            unreachable_timeout=timedelta(seconds=1),
        )
        part = source.build_part("in", "orders:0", None)
        read = 0
        started = time.monotonic()
        while read == 0 and time.monotonic() - started < GUARD_S:
            read += sum(batch.num_rows for _, batch in part.next_batch())
    finally:
        cluster.stop()  # the brokers die after the first batch, mid-run
    assert 0 < read < RECORDS, read
    started = time.monotonic()
    with pytest.raises(SourceError) as failed:
        while time.monotonic() - started < GUARD_S:
            read += sum(batch.num_rows for _, batch in part.next_batch())
            time.sleep(0.01)
    part.close()
    assert read < RECORDS, read
    message = str(failed.value)
    assert "partition `orders:0` read nothing for 1 s" in message
    assert f"stopped at offset {read}, expected to reach {RECORDS}" in message
    assert "`unreachable_timeout`" in message


@pytest.mark.parametrize("bad", [timedelta(0), 5, "60s"])
def test_the_bound_is_a_positive_timedelta_or_none(bad: object) -> None:
    with pytest.raises(ConfigError, match="unreachable_timeout"):
        KafkaSource(["localhost:9092"], ["t"], unreachable_timeout=bad)  # type: ignore[arg-type]
    KafkaSource(["localhost:9092"], ["t"], unreachable_timeout=None)
