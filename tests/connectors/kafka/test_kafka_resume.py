"""KafkaSource resume safety: a position the partition no longer has fails loudly.

The mock cluster cannot delete, truncate or recreate a topic, so a recreated topic is
met the way a resumed flow meets it: with a resume state whose offset is past the end
of a fresh topic, or whose leader epoch the partition never had.
"""

from __future__ import annotations

import pickle
import time
from typing import Any

import pytest

from tests.connectors.kafka.test_kafka_source import poll_until
from tests.fixtures.kafka import real_broker
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.kafka._resume import check_resume, make_state, read_state
from thalweg_bytewax.errors import ConfigError, SourceError
from thalweg_bytewax.testing import produce


def fill(bootstrap: str, topic: str, n: int = 5, partition: int = 0) -> None:
    produce(bootstrap, topic, [{"value": b"x", "partition": partition} for _ in range(n)])


def drain(part: Any, timeout_s: float = 10.0) -> int:
    """Poll until EOF (or the timeout); the number of rows read. Errors propagate."""
    rows = 0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            rows += sum(b.num_rows for _, b in part.next_batch())
        except StopIteration:
            return rows
        time.sleep(0.01)
    return rows


@pytest.mark.parametrize("tail", [False, True])
def test_resume_past_the_end_fails_loudly_in_bounded_and_tail_mode(
    kafka_bootstrap: str, make_topic: Any, tail: bool
) -> None:
    # Before: a bounded run took offset 50 >= end 5 as "done" and ended with 0 records.
    topic = make_topic()
    fill(kafka_bootstrap, topic)
    source = KafkaSource([kafka_bootstrap], [topic], tail=tail)
    with pytest.raises(
        SourceError,
        match=rf"partition `{topic}:0` cannot resume at offset 50: expected at most its end "
        r"offset; got end 5 \(the topic was recreated",
    ):
        source.build_part("in", f"{topic}:0", make_state(50, 0, None))


@pytest.mark.parametrize("tail", [False, True])
def test_old_int_state_past_the_end_fails_loudly_too(
    kafka_bootstrap: str, make_topic: Any, tail: bool
) -> None:
    topic = make_topic()
    fill(kafka_bootstrap, topic)
    with pytest.raises(SourceError, match=r"cannot resume at offset 9"):
        KafkaSource([kafka_bootstrap], [topic], tail=tail).build_part("in", f"{topic}:0", 9)


def test_snapshot_keeps_leader_epoch_and_cluster_and_pickles(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    topic = make_topic()
    fill(kafka_bootstrap, topic)
    source = KafkaSource([kafka_bootstrap], [topic], tail=False)
    part = source.build_part("in", f"{topic}:0", None)
    assert part.snapshot()["leader_epoch"] is None  # nothing read yet
    assert drain(part) == 5
    state = part.snapshot()
    part.close()
    assert state["next_offset"] == 5
    assert state["leader_epoch"] == 0
    assert state["cluster"] is not None
    assert (state["topic_id"] is not None) == real_broker()
    assert pickle.loads(pickle.dumps(state)) == state


@pytest.mark.parametrize("tail", [False, True])
def test_leader_epoch_the_partition_never_had_fails_as_truncation(
    kafka_bootstrap: str, make_topic: Any, tail: bool
) -> None:
    # A topic recreated under the flow: the offset exists again, the epoch does not.
    topic = make_topic()
    fill(kafka_bootstrap, topic)
    part = KafkaSource([kafka_bootstrap], [topic], tail=tail).build_part(
        "in", f"{topic}:0", make_state(3, 7, None)
    )
    try:
        with pytest.raises(
            SourceError,
            match=rf"partition `{topic}:0` cannot continue at offset 3 \(leader epoch 7\): "
            r"the broker's log no longer holds it",
        ):
            drain(part, timeout_s=20)
    finally:
        part.close()


def test_a_valid_leader_epoch_resumes_exactly(kafka_bootstrap: str, make_topic: Any) -> None:
    topic = make_topic()
    fill(kafka_bootstrap, topic)
    part = KafkaSource([kafka_bootstrap], [topic], tail=False).build_part(
        "in", f"{topic}:0", make_state(3, 0, None)
    )
    got = poll_until(part, 2)
    part.close()
    assert [o for _, b in got for o in b.column("_twg_source_offset").to_pylist()] == [3, 4]


def test_old_int_state_still_resumes(kafka_bootstrap: str, make_topic: Any) -> None:
    topic = make_topic()
    fill(kafka_bootstrap, topic)
    part = KafkaSource([kafka_bootstrap], [topic], tail=False).build_part("in", f"{topic}:0", 4)
    got = poll_until(part, 1)
    state = part.snapshot()
    part.close()
    assert [o for _, b in got for o in b.column("_twg_source_offset").to_pylist()] == [4]
    assert state["next_offset"] == 5


def test_state_of_the_previous_release_without_a_topic_id_still_resumes(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    topic = make_topic()
    fill(kafka_bootstrap, topic)
    old: Any = {"next_offset": 3, "leader_epoch": 0, "cluster": None}  # as stored before ids
    part = KafkaSource([kafka_bootstrap], [topic], tail=False).build_part("in", f"{topic}:0", old)
    got = poll_until(part, 2)
    state = part.snapshot()
    part.close()
    assert [o for _, b in got for o in b.column("_twg_source_offset").to_pylist()] == [3, 4]
    assert state["next_offset"] == 5
    # The topic's id from now on where the cluster has ids (Apache Kafka), else none.
    assert (state["topic_id"] is not None) == real_broker()
    assert pickle.loads(pickle.dumps(state)) == state


def test_a_different_topic_id_fails_the_resume_and_a_missing_one_is_no_evidence() -> None:
    with pytest.raises(
        SourceError,
        match=r"partition `t:0` cannot resume at offset 6: its state belongs to topic id "
        r"`old-id`; got topic id `new-id` \(the topic was deleted and recreated",
    ):
        check_resume("t:0", make_state(6, 0, "c", "old-id"), 0, 10, "c", "new-id")
    check_resume("t:0", make_state(6, 0, "c", "same"), 0, 10, "c", "same")
    check_resume("t:0", make_state(6, 0, "c", None), 0, 10, "c", "new-id")  # older state
    check_resume("t:0", make_state(6, 0, "c", "old-id"), 0, 10, "c", None)  # no ids now


def test_state_of_another_cluster_fails_loudly(kafka_bootstrap: str, make_topic: Any) -> None:
    topic = make_topic()
    fill(kafka_bootstrap, topic)
    with pytest.raises(SourceError, match=r"belongs to cluster `elsewhere`; got cluster `"):
        KafkaSource([kafka_bootstrap], [topic]).build_part(
            "in", f"{topic}:0", make_state(2, 0, "elsewhere")
        )


def test_position_before_the_start_fails_loudly() -> None:
    # Retention deleted records 10..99 before they were read (the mock keeps everything).
    with pytest.raises(
        SourceError,
        match=r"partition `t:0` cannot resume at offset 10: expected at least its earliest "
        r"offset; got earliest 100 \(retention deleted 90 records",
    ):
        check_resume("t:0", make_state(10, 0, "c"), 100, 200, "c")
    check_resume("t:0", make_state(100, 0, "c"), 100, 200, "c")  # the edges are fine
    check_resume("t:0", make_state(200, 0, "c"), 100, 200, "c")


@pytest.mark.parametrize("state", [True, -1, "5", {"offset": 5}, {"next_offset": "5"}, [5]])
def test_unknown_state_shapes_are_refused(state: Any) -> None:
    with pytest.raises(ConfigError, match=r"resume state of partition `t:0` expected an offset"):
        read_state("t:0", state)
