"""KafkaSource on Apache Kafka: what librdkafka's mock cluster cannot show.

Transactions filtered by isolation level (and the raw lane recording which records a
level delivered), records deleted below a resume position (DeleteRecords), a topic
deleted and recreated under a resumed flow, partitions added while a flow runs, a 10 MB
record and a 500-partition topic made with CreateTopics. These use the session's Apache
Kafka node (``apache_kafka``) whatever ``kafka_bootstrap`` is.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    NewPartitions,
)

from tests.connectors.kafka.test_kafka_fidelity import run_raw_lane
from tests.connectors.kafka.test_kafka_resume import drain
from tests.connectors.kafka.test_kafka_sink_isolation import transactions
from tests.fixtures.kafka import create_topic, topic_name
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.dev._apache_kafka import ApacheKafka
from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.testing import produce


@pytest.fixture
def new_topic(apache_kafka: ApacheKafka, request: pytest.FixtureRequest) -> Any:
    def make(partitions: int = 4, config: dict[str, str] | None = None) -> str:
        name = topic_name(request)
        create_topic(apache_kafka.bootstrap, name, partitions, config)
        return name

    return make


def admin(kafka: ApacheKafka) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka.bootstrap, "log_level": 3})


def read_partition(bootstrap: str, topic: str, partition: int, state: Any = None) -> Any:
    """(rows read to the end, the partition's snapshot) from ``state``."""
    part = KafkaSource([bootstrap], [topic], tail=False).build_part(
        "in", f"{topic}:{partition}", state
    )
    try:
        rows = drain(part, timeout_s=30)
        return rows, part.snapshot()
    finally:
        part.close()


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_the_raw_lane_records_what_each_isolation_level_delivers(
    apache_kafka: ApacheKafka, new_topic: Any, tmp_path: Path, isolation: str
) -> None:
    # Offsets of partition 0: a 0-9, marker 10, b 11-20 (aborted), marker 21, c 22-24,
    # marker 25. read_committed skips the aborted records and every marker.
    topic = new_topic()
    transactions(apache_kafka.bootstrap, topic)
    lane = tmp_path / "lane"
    run_raw_lane(apache_kafka.bootstrap, topic, lane, isolation_level=isolation)
    table = read_lane(lane).sort_by("_twg_source_offset")
    offsets = table.column("_twg_source_offset").to_pylist()
    values = table.column("_twg_source_value").to_pylist()
    if isolation == "read_committed":
        assert offsets == [*range(10), 22, 23, 24]
        assert Counter(values) == {b"a": 10, b"c": 3}
    else:
        assert offsets == [*range(10), *range(11, 21), 22, 23, 24]
        assert Counter(values) == {b"a": 10, b"b": 10, b"c": 3}


def test_records_deleted_below_the_resume_position_fail_the_resume(
    apache_kafka: ApacheKafka, new_topic: Any
) -> None:
    topic = new_topic()
    produce(apache_kafka.bootstrap, topic, [{"value": b"x", "partition": 0} for _ in range(5)])
    rows, state = read_partition(apache_kafka.bootstrap, topic, 0)
    assert rows == 5 and state["next_offset"] == 5
    produce(apache_kafka.bootstrap, topic, [{"value": b"y", "partition": 0} for _ in range(15)])
    # Retention (here DeleteRecords, what retention does per segment) removes 5..11 unread.
    client = admin(apache_kafka)  # held: its futures complete only while it lives
    deleted = client.delete_records([TopicPartition(topic, 0, 12)])
    for future in deleted.values():
        future.result(timeout=30)
    with pytest.raises(
        SourceError,
        match=rf"partition `{topic}:0` cannot resume at offset 5: expected at least its "
        r"earliest offset; got earliest 12 \(retention deleted 7 records",
    ):
        read_partition(apache_kafka.bootstrap, topic, 0, state)
    # A position at the new start still resumes.
    rows, _ = read_partition(apache_kafka.bootstrap, topic, 0, {**state, "next_offset": 12})
    assert rows == 8


def wait_deleted(kafka: ApacheKafka, topic: str, timeout_s: float = 60) -> None:
    client = admin(kafka)
    deadline = time.monotonic() + timeout_s
    while topic in client.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"topic {topic} still listed"
        time.sleep(0.5)


def recreate(kafka: ApacheKafka, topic: str) -> None:
    client = admin(kafka)  # held: its futures complete only while it lives
    for future in client.delete_topics([topic], operation_timeout=60).values():
        future.result(timeout=90)
    wait_deleted(kafka, topic)
    deadline = time.monotonic() + 60
    while True:  # the deletion completes asynchronously on the broker
        try:
            create_topic(kafka.bootstrap, topic)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


@pytest.mark.parametrize("refill", [2, 10], ids=["short-of-the-position", "past-it"])
def test_a_topic_deleted_and_recreated_is_detected_on_resume_by_its_topic_id(
    apache_kafka: ApacheKafka, new_topic: Any, refill: int
) -> None:
    # Refilled past the stored offset 6, the new topic's offsets and leader epoch (0)
    # look like the old one's: only the topic id tells them apart. Before topic ids
    # were kept, the resume read the new topic from offset 6, skipping its first six.
    topic = new_topic()
    produce(apache_kafka.bootstrap, topic, [{"value": b"x", "partition": 0} for _ in range(6)])
    _, state = read_partition(apache_kafka.bootstrap, topic, 0)
    recreate(apache_kafka, topic)
    new = [{"value": b"n", "partition": 0} for _ in range(refill)]
    produce(apache_kafka.bootstrap, topic, new)
    with pytest.raises(
        SourceError,
        match=rf"partition `{topic}:0` cannot resume at offset 6: its state belongs to topic "
        rf"id `{re.escape(str(state.get('topic_id')))}`; got topic id `[^`]+` \(the topic "
        r"was deleted and recreated under the same name.*start the flow with a fresh "
        r"recovery directory",
    ):
        read_partition(apache_kafka.bootstrap, topic, 0, state)
    # A fresh start reads the new topic whole, and its state names the new id.
    rows, fresh = read_partition(apache_kafka.bootstrap, topic, 0)
    assert rows == refill
    assert fresh["topic_id"] is not None and fresh["topic_id"] != state["topic_id"]


def test_state_of_the_previous_release_without_a_topic_id_resumes_and_keeps_the_old_checks(
    apache_kafka: ApacheKafka, new_topic: Any
) -> None:
    topic = new_topic()
    produce(apache_kafka.bootstrap, topic, [{"value": b"x", "partition": 0} for _ in range(6)])
    old = {"next_offset": 4, "leader_epoch": 0, "cluster": None}  # no `topic_id` key
    rows, state = read_partition(apache_kafka.bootstrap, topic, 0, old)
    assert rows == 2
    assert state["next_offset"] == 6 and state["topic_id"] is not None  # kept from now on
    recreate(apache_kafka, topic)
    produce(apache_kafka.bootstrap, topic, [{"value": b"n", "partition": 0} for _ in range(2)])
    with pytest.raises(
        SourceError,
        match=rf"partition `{topic}:0` cannot resume at offset 6: expected at most its end "
        r"offset; got end 2 \(the topic was recreated",
    ):
        read_partition(apache_kafka.bootstrap, topic, 0, {**old, "next_offset": 6})


def test_partitions_added_while_a_flow_runs_are_named_then_read_from_the_start(
    apache_kafka: ApacheKafka, new_topic: Any
) -> None:
    bootstrap = apache_kafka.bootstrap
    topic = new_topic(partitions=2)
    produce(bootstrap, topic, [{"value": b"x", "partition": p} for p in (0, 1) for _ in range(3)])
    running = KafkaSource(
        [bootstrap], [topic], tail=True, partition_check_interval=timedelta(milliseconds=200)
    )
    assert running.list_parts() == [f"{topic}:0", f"{topic}:1"]
    parts = {p: running.build_part("in", f"{topic}:{p}", None) for p in (0, 1)}
    try:
        states = {}
        for p, part in parts.items():
            assert drain(part, timeout_s=3) == 3  # tail mode: polls on after the end
            states[p] = part.snapshot()
        client = admin(apache_kafka)  # held: its futures complete only while it lives
        added = client.create_partitions([NewPartitions(topic, 4)])
        for future in added.values():
            future.result(timeout=60)
        produce(bootstrap, topic, [{"value": b"new", "partition": p} for p in (2, 3)])
        deadline = time.monotonic() + 60
        while running.new_partitions != {topic: (2, 3)}:
            assert time.monotonic() < deadline, running.new_partitions
            time.sleep(0.1)
    finally:
        for part in parts.values():
            part.close()
    # The restarted flow lists the new partitions and reads them from their start.
    restarted = KafkaSource([bootstrap], [topic], tail=False, starting_offset="latest")
    assert len(restarted.list_parts()) == 4
    resumed = {p: restarted.build_part("in", f"{topic}:{p}", states[p]) for p in (0, 1)}
    fresh = {p: restarted.build_part("in", f"{topic}:{p}", None) for p in (2, 3)}
    try:
        assert [drain(part) for part in resumed.values()] == [0, 0]
        assert [drain(part) for part in fresh.values()] == [1, 1]
    finally:
        for part in (*resumed.values(), *fresh.values()):
            part.close()


def test_a_10_mb_record_passes_through_the_raw_lane_intact(
    apache_kafka: ApacheKafka, new_topic: Any, tmp_path: Path
) -> None:
    topic = new_topic(partitions=1, config={"max.message.bytes": str(12 * 2**20)})
    big = bytes(range(256)) * (10 * 2**20 // 256)
    producer = Producer(
        {
            "bootstrap.servers": apache_kafka.bootstrap,
            "message.max.bytes": 12 * 2**20,
            "log_level": 3,
        }
    )
    producer.produce(topic, value=b"before", partition=0)
    producer.produce(topic, value=big, key=b"big", partition=0)
    producer.produce(topic, value=b"after", partition=0)
    assert producer.flush(60) == 0
    lane = tmp_path / "lane"
    run_raw_lane(apache_kafka.bootstrap, topic, lane)
    table = read_lane(lane).sort_by("_twg_source_offset")
    values = table.column("_twg_source_value").to_pylist()
    assert len(values) == 3 and values[0] == b"before" and values[2] == b"after"
    assert len(values[1]) == len(big) and values[1] == big


def test_a_500_partition_topic_made_with_create_topics_is_read_whole(
    apache_kafka: ApacheKafka, new_topic: Any, tmp_path: Path
) -> None:
    topic = new_topic(partitions=500)
    md = admin(apache_kafka).list_topics(topic, timeout=30)
    assert len(md.topics[topic].partitions) == 500
    produce(
        apache_kafka.bootstrap,
        topic,
        [{"value": f"{p}-{i}".encode(), "partition": p} for p in range(500) for i in range(2)],
    )
    assert len(KafkaSource([apache_kafka.bootstrap], [topic]).list_parts()) == 500
    lane = tmp_path / "lane"
    run_raw_lane(apache_kafka.bootstrap, topic, lane)
    table = read_lane(lane)
    got = Counter(
        zip(
            table.column("_twg_source_partition").to_pylist(),
            table.column("_twg_source_offset").to_pylist(),
            strict=True,
        )
    )
    assert max(got.values()) == 1
    assert set(got) == {(p, o) for p in range(500) for o in range(2)}
