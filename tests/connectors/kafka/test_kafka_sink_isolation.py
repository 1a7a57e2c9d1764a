"""KafkaSource's isolation level and its count of offsets skipped (aborted transactions).

librdkafka's mock cluster writes transaction markers but hands records of aborted
transactions to ``read_committed`` consumers too; against a real cluster
(``THALWEG_TEST_KAFKA``) the aborted records are skipped and counted.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.fixtures.kafka import real_broker
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.errors import ConfigError


def transactions(bootstrap: str, topic: str) -> None:
    """Partition 0: 10 committed, 10 aborted, 3 committed records (3 markers)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}", "log_level": 3}
    )
    producer.init_transactions(30)
    for tag, n, commit in ((b"a", 10, True), (b"b", 10, False), (b"c", 3, True)):
        producer.begin_transaction()
        for _ in range(n):
            producer.produce(topic, value=tag, partition=0)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def read_all(source: KafkaSource, key: str) -> list[bytes]:
    part = source.build_part("in", key, None)
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            try:
                for _, batch in part.next_batch():
                    values.extend(batch.column("_twg_source_value").to_pylist())
            except StopIteration:
                break
            time.sleep(0.005)
    finally:
        part.close()
    return values


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_offsets_without_a_record_are_counted(
    kafka_bootstrap: str, make_topic: Any, isolation: str
) -> None:
    topic = make_topic()
    transactions(kafka_bootstrap, topic)
    level: Any = isolation
    source = KafkaSource([kafka_bootstrap], [topic], tail=False, isolation_level=level)
    values = read_all(source, f"{topic}:0")
    stats = source.stats[f"{topic}:0"]
    # 23 records and 3 markers: up to the last record, every offset is one or the other.
    assert stats.records + stats.offsets_skipped == 25
    assert stats.offsets_skipped >= 2  # the markers after the first two transactions
    if isolation == "read_uncommitted":
        assert values.count(b"b") == 10
    elif real_broker():  # the mock cluster does not filter them
        assert b"b" not in values and stats.offsets_skipped == 12


def test_the_isolation_level_reaches_the_consumer_and_librdkafka_wins() -> None:
    plain = KafkaSource(["b:9092"], ["t"])
    assert plain._config.consumer_config()["isolation.level"] == "read_committed"
    loose = KafkaSource(["b:9092"], ["t"], isolation_level="read_uncommitted")
    assert loose._config.consumer_config()["isolation.level"] == "read_uncommitted"
    wins = KafkaSource(["b:9092"], ["t"], librdkafka={"isolation.level": "read_uncommitted"})
    assert wins._config.consumer_config()["isolation.level"] == "read_uncommitted"
    with pytest.raises(ConfigError, match=r"`isolation_level` expected one of read_committed"):
        KafkaSource(["b:9092"], ["t"], isolation_level="serializable")  # type: ignore[arg-type]
