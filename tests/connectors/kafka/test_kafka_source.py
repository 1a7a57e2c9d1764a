"""KafkaSource partitions: resume exactly after the last emitted record; loud failures."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.kafka import _partition as partition_module
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import ConfigError, SourceError
from thalweg_bytewax.testing import produce


def poll_until(part: Any, rows: int, timeout_s: float = 20.0) -> list[Any]:
    """Poll a partition (respecting next_awake) until `rows` rows arrived or EOF."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while sum(b.num_rows for _, b in got) < rows and time.monotonic() < deadline:
        try:
            got.extend(part.next_batch())
        except StopIteration:
            break
        time.sleep(0.001)
    return got


def test_snapshot_is_the_offset_after_the_last_emitted_record(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": str(i).encode(), "partition": 0} for i in range(50)])
    source = KafkaSource([kafka_bootstrap], [topic], batch_size=7)
    assert source.list_parts() == [f"{topic}:{p}" for p in range(4)]

    part = source.build_part("in", f"{topic}:0", None)
    first = poll_until(part, 10)
    last_seen = max(b.column("_twg_source_offset").to_pylist()[-1] for _, b in first)
    state = part.snapshot()
    assert state["next_offset"] == last_seen + 1
    part.close()

    resumed = source.build_part("in", f"{topic}:0", state)
    batches = poll_until(resumed, 1)
    resumed.close()
    assert batches, "resumed partition emitted nothing"
    key, batch = batches[0]
    assert key == f"{topic}:0"
    assert batch.column("_twg_source_offset")[0].as_py() == last_seen + 1


def test_empty_polls_back_off_instead_of_blocking(
    kafka_bootstrap: str, make_topic: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x", "partition": 1}])
    part = KafkaSource([kafka_bootstrap], [topic]).build_part("in", f"{topic}:0", None)
    asked = datetime(2026, 1, 1, tzinfo=UTC)

    class Frozen(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Frozen:
            return cls.fromtimestamp(asked.timestamp(), tz)

    monkeypatch.setattr(partition_module, "datetime", Frozen)
    try:
        # Each empty poll hands the wait back to the worker: it answers at once, asking to
        # be woken later, and asks for a longer wait each time, up to 50 ms.
        waits = []
        for _ in range(8):
            assert part.next_batch() == []
            awake = part.next_awake()
            assert awake is not None
            waits.append((awake - asked) / timedelta(milliseconds=1))
        assert waits == [1, 2, 4, 8, 16, 32, 50, 50]
    finally:
        part.close()


def test_bounded_partition_stops_at_the_end_offset(kafka_bootstrap: str, make_topic: Any) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x", "partition": 0} for _ in range(5)])
    part = KafkaSource([kafka_bootstrap], [topic], tail=False).build_part("in", f"{topic}:0", None)
    batches = poll_until(part, 10_000, timeout_s=10)
    assert sum(b.num_rows for _, b in batches) == 5
    with pytest.raises(StopIteration):
        part.next_batch()
    part.close()


def test_starting_offset_latest_and_explicit(kafka_bootstrap: str, make_topic: Any) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": str(i).encode(), "partition": 0} for i in range(10)])
    latest = KafkaSource([kafka_bootstrap], [topic], starting_offset="latest").build_part(
        "in", f"{topic}:0", None
    )
    assert latest.snapshot()["next_offset"] == 10
    latest.close()
    explicit = KafkaSource([kafka_bootstrap], [topic], starting_offset=6, tail=False).build_part(
        "in", f"{topic}:0", None
    )
    got = poll_until(explicit, 4)
    explicit.close()
    assert [v for _, b in got for v in b.column("_twg_source_value").to_pylist()] == [
        b"6",
        b"7",
        b"8",
        b"9",
    ]


def test_unreachable_brokers_fail_fast_and_name_them() -> None:
    source = KafkaSource(["127.0.0.1:1"], ["orders"], metadata_timeout=timedelta(seconds=1))
    # The error comes from the `metadata_timeout` bound, which it names: the listing
    # gives up then instead of retrying the brokers for ever.
    with pytest.raises(SourceError, match=r"cannot reach brokers `127\.0\.0\.1:1` within 1 s"):
        source.list_parts()


def test_missing_topic_is_named(kafka_bootstrap: str) -> None:
    with pytest.raises(SourceError, match=r"topic `no-such-topic-x1` is not available"):
        KafkaSource([kafka_bootstrap], ["no-such-topic-x1"]).list_parts()


def test_missing_topic_among_several_is_named(kafka_bootstrap: str, make_topic: Any) -> None:
    # Several topics are listed with one metadata request; a missing one is still named.
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x", "partition": 0}])
    source = KafkaSource([kafka_bootstrap], [topic, "no-such-topic-x2"])
    with pytest.raises(SourceError, match=r"topic `no-such-topic-x2` is not available"):
        source.list_parts()


def test_listed_partitions_start_from_prefetched_watermarks(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    first, second = make_topic(), make_topic()
    produce(kafka_bootstrap, first, [{"value": b"a", "partition": p % 4} for p in range(10)])
    produce(kafka_bootstrap, second, [{"value": b"b", "partition": 2} for _ in range(3)])
    source = KafkaSource([kafka_bootstrap], [first, second], starting_offset="latest")
    assert source.list_parts() == [f"{t}:{p}" for t in (first, second) for p in range(4)]
    # One request for all partitions: exactly the watermarks the broker reports.
    assert source._meta._watermarks[(first, 0)][:2] == (0, 3)
    assert source._meta._watermarks[(second, 2)][:2] == (0, 3)
    assert source._meta._watermarks[(second, 0)][:2] == (0, 0)
    # Records that arrive between listing and building: "latest" is the end the
    # listing saw, moments before.
    produce(kafka_bootstrap, second, [{"value": b"c", "partition": 2} for _ in range(2)])
    part = source.build_part("in", f"{second}:2", None)
    assert part.snapshot()["next_offset"] == 3
    part.close()
    assert (second, 2) not in source._meta._watermarks  # used once
    # Built again without a new listing (a restart of the partition): asked afresh.
    again = source.build_part("in", f"{second}:2", None)
    assert again.snapshot()["next_offset"] == 5
    again.close()


def test_stale_prefetched_watermarks_are_not_used(kafka_bootstrap: str, make_topic: Any) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x", "partition": 0} for _ in range(4)])
    source = KafkaSource([kafka_bootstrap], [topic], starting_offset="latest")
    source.list_parts()
    low, high, _ = source._meta._watermarks[(topic, 0)]
    assert (low, high) == (0, 4)
    source._meta._watermarks[(topic, 0)] = (low, high, time.monotonic() - 3600)
    produce(kafka_bootstrap, topic, [{"value": b"y", "partition": 0}])
    part = source.build_part("in", f"{topic}:0", None)
    assert part.snapshot()["next_offset"] == 5
    part.close()


def test_unwritable_lane_path_fails_before_data_moves(tmp_path: Path) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a directory")
    with pytest.raises(
        ConfigError, match=r"parquet sink: lane path `.*file\.txt/lane` is not writable"
    ):
        ParquetSink(blocker / "lane").list_parts()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"brokers": []}, "brokers"),
        ({"topics": ""}, "topics"),
        ({"starting_offset": "middle"}, "starting_offset"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_invalid_arguments_are_config_errors(kwargs: dict[str, Any], match: str) -> None:
    args = {"brokers": ["localhost:9092"], "topics": ["t"], **kwargs}
    with pytest.raises(ConfigError, match=match):
        KafkaSource(args.pop("brokers"), args.pop("topics"), **args)


@pytest.mark.slow
def test_broker_outage_is_counted_and_retried_not_fatal(make_topic: Any) -> None:
    from thalweg_bytewax.testing import MockCluster

    cluster = MockCluster().start()
    topic = make_topic()
    try:
        produce(cluster.bootstrap, topic, [{"value": b"x", "partition": 0} for _ in range(3)])
        part = KafkaSource([cluster.bootstrap], [topic]).build_part("in", f"{topic}:0", None)
        assert sum(b.num_rows for _, b in poll_until(part, 3)) == 3
    finally:
        cluster.stop()
    try:
        deadline = time.monotonic() + 20
        while part.stats.transient_errors == 0 and time.monotonic() < deadline:
            assert part.next_batch() == []  # never raises for an outage
            time.sleep(0.05)
        assert part.stats.transient_errors > 0
        assert part.next_awake() is not None
        assert part.snapshot()["next_offset"] == 3  # the position stays after the last record
    finally:
        part.close()


def test_resume_position_the_broker_no_longer_has_fails_loudly(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    # A resume offset past the log end (a recreated topic) must not jump silently to
    # another position: the gap would be lost without a trace. It fails at build, in
    # tail and bounded mode alike (tests/connectors/kafka/test_kafka_resume.py has the rest).
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x", "partition": 0} for _ in range(5)])
    with pytest.raises(
        SourceError, match=rf"partition `{topic}:0` cannot resume at offset 50: .*got end 5"
    ):
        KafkaSource([kafka_bootstrap], [topic]).build_part("in", f"{topic}:0", 50)


@pytest.mark.parametrize(
    ("code", "fatal"),
    [
        ("_TRANSPORT", False),
        ("_ALL_BROKERS_DOWN", False),
        ("NOT_LEADER_FOR_PARTITION", False),
        ("OFFSET_NOT_AVAILABLE", False),
        ("_BAD_MSG", True),
        ("_BAD_COMPRESSION", True),
        ("_LOG_TRUNCATION", True),
        ("_UNKNOWN_PARTITION", True),
        ("_AUTHENTICATION", True),
        ("OFFSET_OUT_OF_RANGE", True),
    ],
)
def test_error_classification_is_transient_only_by_allow_list(code: str, fatal: bool) -> None:
    from confluent_kafka import KafkaError

    from thalweg_bytewax.connectors.kafka._errors import is_fatal

    assert is_fatal(KafkaError(getattr(KafkaError, code))) is fatal


def test_workers_listing_together_ask_for_watermarks_once(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    # Bytewax lists partitions on every worker; workers of one process share the source.
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x", "partition": 0}])
    source = KafkaSource([kafka_bootstrap], [topic])
    source.list_parts()
    first = dict(source._meta._watermarks)
    source.list_parts()
    assert source._meta._watermarks == first  # same entries, same fetch times: not asked again
    assert first[(topic, 0)][:2] == (0, 1)


def test_stats_are_reachable_from_the_source_per_partition_and_in_total(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    topic = make_topic()
    produce(
        kafka_bootstrap,
        topic,
        [{"value": b"v" * 10, "partition": p} for p in (0, 1) for _ in range(20)],
    )
    source = KafkaSource([kafka_bootstrap], [topic], tail=False, batch_size=8)
    assert source.stats == {}
    parts = {key: source.build_part("in", key, None) for key in (f"{topic}:0", f"{topic}:1")}
    try:
        for part in parts.values():
            assert sum(b.num_rows for _, b in poll_until(part, 20)) == 20
    finally:
        for part in parts.values():
            part.close()
    stats = source.stats
    assert set(stats) == set(parts)
    for key, part in parts.items():
        assert stats[key] is part.stats  # live counters, not copies
        assert stats[key].records == 20
        assert stats[key].batches == 3  # 8 + 8 + 4
        assert stats[key].bytes > 0
    total = source.total_stats()
    assert (total.records, total.batches, total.transient_errors) == (40, 6, 0)
    assert total.bytes == sum(s.bytes for s in stats.values())

    # A partition rebuilt in the same process keeps counting: counters never go back.
    again = source.build_part("in", f"{topic}:0", 15)  # resume at offset 15
    try:
        assert sum(b.num_rows for _, b in poll_until(again, 5)) == 5
    finally:
        again.close()
    assert source.stats[f"{topic}:0"].records == 25
    assert source.total_stats().records == 45
