"""KafkaSource shares one prefetch budget among its partitions: memory bounded per process.

Each partition has its own librdkafka prefetch queue, the largest term of its memory;
the source gives each the even share of ``prefetch_budget`` over the partitions it
listed, in bytes (``queued.max.messages.kbytes``, between 256 KiB and 4 MiB) and in
records (``queued.min.messages``: 1,000 records, fewer for a small byte share over 512
bytes a record but never below 1,000; the partition gathers its polls into full
batches, so the queue need not hold one), unless ``librdkafka`` sets them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from thalweg_bytewax.connectors.kafka import KafkaSource, _native, _partition
from thalweg_bytewax.connectors.kafka._config import (
    DEFAULT_PREFETCH_BUDGET,
    partition_prefetch_kbytes,
    partition_prefetch_records,
)
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.testing import produce

QUEUED = "queued.max.messages.kbytes"
MiB = 1024 * 1024


def test_the_budget_is_shared_evenly_between_256_kib_and_4_mib() -> None:
    assert partition_prefetch_kbytes(64 * MiB, 16) == 4096  # noqa: PLR2004
    assert partition_prefetch_kbytes(64 * MiB, 64) == 1024  # noqa: PLR2004
    assert partition_prefetch_kbytes(64 * MiB, 100) == 655  # noqa: PLR2004
    assert partition_prefetch_kbytes(64 * MiB, 1000) == 256  # noqa: PLR2004 - the floor
    assert partition_prefetch_kbytes(64 * MiB, 1) == 4096  # noqa: PLR2004 - the cap
    assert partition_prefetch_kbytes(None, 1000) == 4096  # noqa: PLR2004 - no budget


def test_the_default_budget_keeps_4_mib_up_to_64_partitions() -> None:
    assert partition_prefetch_kbytes(DEFAULT_PREFETCH_BUDGET, 64) == 4096  # noqa: PLR2004
    assert partition_prefetch_kbytes(DEFAULT_PREFETCH_BUDGET, 256) == 1024  # noqa: PLR2004


def test_a_partition_prefetches_1000_records_not_one_poll_at_the_default_budget() -> None:
    for partitions in (1, 16, 51, 64, 256):
        assert partition_prefetch_records(DEFAULT_PREFETCH_BUDGET, partitions, 10_000) == 1_000


def test_the_prefetch_in_records_never_drops_below_1000() -> None:
    assert partition_prefetch_records(16 * MiB, 16, 10_000) == 1_000  # noqa: PLR2004
    assert partition_prefetch_records(1 * MiB, 256, 10_000) == 1_000  # noqa: PLR2004 - floor
    assert partition_prefetch_records(16 * MiB, 1, 10) == 1_000  # noqa: PLR2004 - tiny polls
    assert partition_prefetch_records(None, 256, 50_000) == 1_000  # noqa: PLR2004 - no budget


@pytest.mark.parametrize("budget", [0, -1, 1.5, "64MiB", True])
def test_a_budget_that_is_not_a_positive_int_is_refused_by_name(budget: object) -> None:
    with pytest.raises(ConfigError, match="prefetch_budget"):
        KafkaSource(["localhost:9092"], ["t"], prefetch_budget=budget)  # type: ignore[arg-type]


def _built_settings(
    monkeypatch: pytest.MonkeyPatch, source: KafkaSource
) -> list[Mapping[str, Any]]:
    """The librdkafka settings each partition the source builds opens its consumer with."""
    seen: list[Mapping[str, Any]] = []
    real: Callable[[Mapping[str, Any]], bool] = _native.use_native

    def recording(settings: Mapping[str, Any]) -> bool:
        seen.append(dict(settings))
        return real(settings)

    monkeypatch.setattr(_partition, "use_native", recording)
    for key in source.list_parts():
        source.build_part("in", key, None).close()
    return seen


def test_each_partition_consumer_gets_its_share_of_the_listing(
    kafka_bootstrap: str, make_topic: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x", "partition": p} for p in range(4)])
    source = KafkaSource([kafka_bootstrap], [topic], tail=False, prefetch_budget=2 * MiB)
    settings = _built_settings(monkeypatch, source)
    assert [s[QUEUED] for s in settings] == [512] * 4  # 2 MiB over 4 partitions
    assert [s["queued.min.messages"] for s in settings] == [1000] * 4


def test_librdkafka_settings_win_over_the_budget(
    kafka_bootstrap: str, make_topic: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x", "partition": p} for p in range(4)])
    source = KafkaSource(
        [kafka_bootstrap],
        [topic],
        tail=False,
        prefetch_budget=2 * MiB,
        librdkafka={QUEUED: 300},
    )
    assert [s[QUEUED] for s in _built_settings(monkeypatch, source)] == [300] * 4
    records = KafkaSource(
        [kafka_bootstrap],
        [topic],
        tail=False,
        prefetch_budget=2 * MiB,
        librdkafka={"queued.min.messages": 7},
    )
    assert {s["queued.min.messages"] for s in _built_settings(monkeypatch, records)} == {7}


def test_each_fetch_is_256_kib_and_waits_100_ms_unless_librdkafka_says_otherwise(
    kafka_bootstrap: str, make_topic: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x", "partition": p} for p in range(2)])
    source = KafkaSource([kafka_bootstrap], [topic], tail=False)
    fetches = {
        (s["max.partition.fetch.bytes"], s["fetch.wait.max.ms"])
        for s in _built_settings(monkeypatch, source)
    }
    assert fetches == {(256 * 1024, 100)}
    tuned = KafkaSource(
        [kafka_bootstrap],
        [topic],
        tail=False,
        librdkafka={"max.partition.fetch.bytes": MiB, "fetch.wait.max.ms": 500},
    )
    fetches = {
        (s["max.partition.fetch.bytes"], s["fetch.wait.max.ms"])
        for s in _built_settings(monkeypatch, tuned)
    }
    assert fetches == {(MiB, 500)}


def queued_after_first_poll(bootstrap: str, topic: str, **kwargs: Any) -> int:
    """Records librdkafka prefetched for partition 0 once the first poll started it."""
    source = KafkaSource([bootstrap], [topic], tail=False, batch_size=1_000, **kwargs)
    part = source.build_part("in", f"{topic}:0", None)
    try:
        part.next_batch()  # assigns the partition and starts fetching
        # The fetcher fills the queue up to its bound, then waits: long enough for it to
        # reach 40,000 records unbounded on a loaded machine (1 s reached 29,000 once).
        time.sleep(3.0)
        native = part._native  # noqa: SLF001 - what the queue holds, without a poll's limits
        assert native is not None, "the native consume is not in use"
        return int(native.consume(200_000, 1 << 40)[0])
    finally:
        part.close()


@pytest.mark.skipif(
    _native._load()[0] is None,  # noqa: SLF001
    reason="the native consume extension is not built",
)
def test_a_partition_prefetches_about_1000_small_records_not_4_mib(
    kafka_bootstrap: str, make_topic: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 40,000 records of 100 bytes: under the 4 MiB byte bound, so without a bound in
    # records librdkafka queues all of them (each also holds a ~260-byte operation).
    monkeypatch.setenv(_native.CONSUME_ENV, "native")
    topic = make_topic()
    records = [{"value": b"%0100d" % i, "partition": 0} for i in range(40_000)]
    produce(kafka_bootstrap, topic, records, config={"batch.num.messages": 500})
    queued = queued_after_first_poll(kafka_bootstrap, topic)
    # 1,000 records, plus the rest of the fetch that crossed them: at most 256 KiB,
    # 2,000 of these records on Apache Kafka (9,500 at librdkafka's 1 MiB); the
    # mock cluster answers each fetch with one producer batch, 500 records, whatever
    # the size).
    assert 0 < queued < 5_000  # noqa: PLR2004
    unbounded = queued_after_first_poll(
        kafka_bootstrap, topic, librdkafka={"queued.min.messages": 100_000}
    )
    assert unbounded > 35_000  # noqa: PLR2004 - the check can fail: the records bound it


@pytest.mark.parametrize(("batch_size", "records"), [(10_000, 1_000), (50_000, 1_000), (10, 1_000)])
def test_without_a_budget_the_prefetch_in_records_is_1000(
    kafka_bootstrap: str,
    make_topic: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
    batch_size: int,
    records: int,
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x", "partition": 0}])
    source = KafkaSource(
        [kafka_bootstrap], [topic], tail=False, batch_size=batch_size, prefetch_budget=None
    )
    assert {s["queued.min.messages"] for s in _built_settings(monkeypatch, source)} == {records}
    custom = KafkaSource(
        [kafka_bootstrap],
        [topic],
        tail=False,
        prefetch_budget=None,
        librdkafka={"queued.min.messages": 7},
    )
    assert {s["queued.min.messages"] for s in _built_settings(monkeypatch, custom)} == {7}


def test_a_small_budget_reaches_librdkafka_in_bytes_and_records(
    kafka_bootstrap: str, make_topic: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 16 MiB over the topic's 4 partitions: 4 MiB and 1,000 records each.
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x", "partition": p} for p in range(4)])
    source = KafkaSource([kafka_bootstrap], [topic], tail=False, prefetch_budget=16 * MiB)
    settings = _built_settings(monkeypatch, source)
    assert [(s[QUEUED], s["queued.min.messages"]) for s in settings] == [(4096, 1000)] * 4
