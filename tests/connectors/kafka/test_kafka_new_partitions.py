"""Partitions added to a topic: noticed while the flow runs, read from the start after.

The mock cluster cannot add partitions to a topic (its admin API hangs), so a topic
that gained partitions is met the way the flow meets it: partitions 2 and 3 were not
listed when the flow started (or not in its recovery state when it resumed).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.kafka._resume import make_state
from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.testing import produce


def fill(bootstrap: str, topic: str, per_partition: int = 3) -> None:
    produce(
        bootstrap,
        topic,
        [{"value": b"x", "partition": p} for p in range(4) for _ in range(per_partition)],
    )


@pytest.mark.parametrize("starting_offset", ["latest", 2])
def test_partition_without_state_in_a_resumed_topic_starts_at_earliest(
    kafka_bootstrap: str, make_topic: Any, starting_offset: Any
) -> None:
    # Before: it started at `starting_offset` and the records written to it before the
    # restart were skipped without a word.
    topic = make_topic()
    fill(kafka_bootstrap, topic)
    source = KafkaSource([kafka_bootstrap], [topic], starting_offset=starting_offset)
    resumed = source.build_part("in", f"{topic}:0", make_state(3, 0, None))
    appeared = source.build_part("in", f"{topic}:3", None)
    try:
        assert appeared.snapshot()["next_offset"] == 0
    finally:
        resumed.close()
        appeared.close()


def test_first_run_still_starts_at_starting_offset(kafka_bootstrap: str, make_topic: Any) -> None:
    topic, other = make_topic(), make_topic()
    fill(kafka_bootstrap, topic)
    fill(kafka_bootstrap, other)
    source = KafkaSource([kafka_bootstrap], [topic, other], starting_offset="latest")
    # A resumed partition of *another* topic does not make this topic's partitions new:
    # a topic added to `topics` starts where `starting_offset` says.
    resumed = source.build_part("in", f"{other}:0", make_state(3, 0, None))
    fresh = source.build_part("in", f"{topic}:3", None)
    try:
        assert fresh.snapshot()["next_offset"] == 3
    finally:
        resumed.close()
        fresh.close()


def wait_for(predicate: Any, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("fail", [False, True])
def test_partitions_added_while_running_are_logged_counted_and_optionally_fatal(
    kafka_bootstrap: str, make_topic: Any, caplog: pytest.LogCaptureFixture, fail: bool
) -> None:
    topic = make_topic()
    fill(kafka_bootstrap, topic)
    source = KafkaSource(
        [kafka_bootstrap],
        [topic],
        partition_check_interval=timedelta(milliseconds=50),
        fail_on_new_partitions=fail,
    )
    assert len(source.list_parts()) == 4
    source._meta.listed[topic] = frozenset({0, 1})  # as listed before partitions 2, 3 came
    caplog.set_level(logging.WARNING, logger="thalweg_bytewax.connectors.kafka._watch")
    part = source.build_part("in", f"{topic}:0", None)
    try:
        assert wait_for(lambda: source.new_partitions == {topic: (2, 3)})
        watch = source._meta.watch
        assert watch is not None
        checks = watch.checks
        assert wait_for(lambda: watch.checks >= checks + 3)  # keeps checking ...
        assert watch.new_partitions == 2  # ... counts each partition once ...
        warnings = [r for r in caplog.records if "gained partitions 2,3" in r.getMessage()]
        assert len(warnings) == 1  # ... and logs it once
        if fail:
            with pytest.raises(
                SourceError, match=rf"partitions were added while the flow runs \(`{topic}`: 2,3\)"
            ):
                part.next_batch()
        else:
            # A check that answers only once the partition has read: a partition that
            # waited for the check would never return.
            asked, answer = threading.Event(), threading.Event()

            class HeldMetadata:
                def list_topics(self, timeout: float) -> Any:
                    asked.set()
                    answer.wait()
                    raise KafkaException(KafkaError(KafkaError._TRANSPORT))

            held = threading.Thread(target=watch.check, args=(HeldMetadata(),))
            held.start()
            assert asked.wait(10)
            part.next_batch()  # reads on, never waits for the check
            assert held.is_alive()  # the check was still waiting for its answer
            answer.set()
            held.join()
    finally:
        part.close()
    assert wait_for(lambda: not any(t.name == "thalweg-kafka-watch" for t in _threads()))


def _threads() -> list[Any]:
    import threading

    return threading.enumerate()


def test_check_can_be_turned_off(kafka_bootstrap: str, make_topic: Any) -> None:
    topic = make_topic()
    fill(kafka_bootstrap, topic, 1)
    source = KafkaSource([kafka_bootstrap], [topic], partition_check_interval=None)
    part = source.build_part("in", f"{topic}:0", None)
    part.close()
    assert source._meta.watch is None
    assert source.new_partitions == {}
