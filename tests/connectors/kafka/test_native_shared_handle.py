"""The native consume shares one librdkafka handle among a worker's partitions.

Each partition reads its own partition queue of the shared handle; these tests pin what
sharing must not change: every record of every partition arrives once and in order, a
resumed position is still validated against the broker's log (KIP-320) whether it was
assigned with others or after the handle started reading, and closing one partition
leaves the others reading.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow as pa
import pytest

from tests.connectors.kafka.test_kafka_resume import drain, fill
from tests.connectors.kafka.test_kafka_source import poll_until
from tests.connectors.kafka.test_native_consume import NOW, _assert_same, _pure, corpus_topic
from thalweg_bytewax.connectors.kafka import KafkaSource, _native
from thalweg_bytewax.connectors.kafka._config import consumer_config
from thalweg_bytewax.connectors.kafka._resume import make_state
from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.records.kafka_batches import raw_batch_from_native

pytestmark = pytest.mark.skipif(
    _native._load()[0] is None,  # noqa: SLF001 - tests of the private module
    reason="the native consume extension is not built",
)

__all__ = ["corpus_topic"]  # the module-scoped fixture, shared with the differential tests


QUICK_FETCH = {"fetch.wait.max.ms": 10}
"""The mock cluster holds a fetch that finds nothing for `fetch.wait.max.ms` (100 ms by
the source's default), also when records arrive meanwhile: a partition at its end waits
that long for the next ones."""


@pytest.fixture(autouse=True)
def _native_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_native.CONSUME_ENV, "native")


def _offsets(part: Any, rows: int) -> list[int]:
    """The offsets of the next `rows` records the partition emits."""
    return [o for _, b in poll_until(part, rows) for o in b.column("_twg_source_offset").to_pylist()]


def test_partitions_opened_in_one_thread_share_one_handle_and_read_every_record(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    topic = make_topic()
    for p in range(4):
        fill(kafka_bootstrap, topic, n=5 + p, partition=p)
    source = KafkaSource([kafka_bootstrap], [topic], tail=False)
    parts = [source.build_part("in", f"{topic}:{p}", None) for p in range(4)]
    client = parts[0]._native.client  # noqa: SLF001
    assert all(part._native.client is client for part in parts)  # noqa: SLF001
    assert client.consumers == 4
    assert [drain(part) for part in parts] == [5, 6, 7, 8]
    for part in parts:
        part.close()
    assert client.closed


def test_another_thread_gets_its_own_handle(kafka_bootstrap: str, make_topic: Any) -> None:
    # A Bytewax worker is a thread: its partitions share a handle, other workers' don't.
    topic = make_topic()
    fill(kafka_bootstrap, topic, partition=0)
    fill(kafka_bootstrap, topic, partition=1)
    source = KafkaSource([kafka_bootstrap], [topic], tail=False)
    here = source.build_part("in", f"{topic}:0", None)
    built: list[Any] = []
    worker = threading.Thread(target=lambda: built.append(source.build_part("in", f"{topic}:1", None)))
    worker.start()
    worker.join()
    try:
        assert here._native.client is not built[0]._native.client  # noqa: SLF001
    finally:
        here.close()
        built[0].close()


def test_resumed_partitions_assigned_together_each_have_their_leader_epoch_checked(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    topic = make_topic()
    for p in range(3):
        fill(kafka_bootstrap, topic, partition=p)
    source = KafkaSource([kafka_bootstrap], [topic], tail=False)
    good = source.build_part("in", f"{topic}:0", make_state(3, 0, None))
    recreated = source.build_part("in", f"{topic}:1", make_state(3, 7, None))
    fresh = source.build_part("in", f"{topic}:2", None)
    try:
        assert recreated._native.client is good._native.client  # noqa: SLF001
        assert _offsets(good, 2) == [3, 4]
        assert _offsets(fresh, 5) == [0, 1, 2, 3, 4]
        with pytest.raises(SourceError, match=rf"`{topic}:1` cannot continue at offset 3"):
            drain(recreated, timeout_s=20)
    finally:
        for part in (good, recreated, fresh):
            part.close()


def test_a_partition_resumed_after_reading_started_is_still_checked(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    # librdkafka checks a resumed leader epoch only when it learns the leader after the
    # assignment: a handle that already reads the topic would skip it, so the late
    # partition gets a handle of its own.
    topic = make_topic()
    fill(kafka_bootstrap, topic, partition=0)
    fill(kafka_bootstrap, topic, partition=1)
    source = KafkaSource([kafka_bootstrap], [topic], tail=False)
    first = source.build_part("in", f"{topic}:0", None)
    recreated = None
    try:
        assert _offsets(first, 5) == [0, 1, 2, 3, 4]
        recreated = source.build_part("in", f"{topic}:1", make_state(3, 7, None))
        assert recreated._native.client is not first._native.client  # noqa: SLF001
        with pytest.raises(SourceError, match=rf"`{topic}:1` cannot continue at offset 3"):
            drain(recreated, timeout_s=20)
    finally:
        first.close()
        if recreated is not None:
            recreated.close()


def test_closing_one_partition_leaves_the_others_reading(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    topic = make_topic()
    fill(kafka_bootstrap, topic, n=3, partition=0)
    fill(kafka_bootstrap, topic, n=3, partition=1)
    source = KafkaSource([kafka_bootstrap], [topic], tail=True, librdkafka=QUICK_FETCH)
    stays = source.build_part("in", f"{topic}:0", None)
    goes = source.build_part("in", f"{topic}:1", None)
    try:
        assert _offsets(stays, 3) == [0, 1, 2]
        assert _offsets(goes, 3) == [0, 1, 2]
        goes.close()
        fill(kafka_bootstrap, topic, n=2, partition=0)
        assert _offsets(stays, 2) == [3, 4]
        assert not stays._native.client.closed  # noqa: SLF001
    finally:
        stays.close()


def test_records_fetched_before_a_queue_is_taken_are_neither_lost_nor_reordered(
    kafka_bootstrap: str, corpus_topic: tuple[str, dict[int, int]]
) -> None:
    # Queues are taken right after the assignment; a fetch answered in between lands on
    # the consumer queue. The delay makes that happen for every record here.
    topic, counts = corpus_topic
    client = _native._load()[0].Client(  # noqa: SLF001
        _native.native_settings(consumer_config([kafka_bootstrap], None)), queue_delay_ms=2500
    )
    consumers = {p: _native._load()[0].Consumer(client) for p in (0, 1)}  # noqa: SLF001
    for p, c in consumers.items():
        c.assign(topic, p, 0, -1)
    batches: dict[int, list[pa.RecordBatch]] = {0: [], 1: []}
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and any(
            sum(b.num_rows for b in batches[p]) < counts[p] for p in (0, 1)
        ):
            for p, c in consumers.items():
                out = c.consume(7, 1 << 30)  # small batches: strays wait in pending
                assert out[-1] == [], out[-1]
                if out[0]:
                    batches[p].append(
                        raw_batch_from_native(
                            out, topic=topic, partition=p, cluster="c", ingest_ts=NOW
                        )
                    )
            time.sleep(0.01)
        assert client.strays > 0
    finally:
        for c in consumers.values():
            c.close()
    assert client.closed
    for p in (0, 1):
        pure = _pure(kafka_bootstrap, topic, p, counts[p])
        _assert_same(pure, pa.Table.from_batches(batches[p]))



@pytest.mark.slow
def test_a_broker_outage_reaches_every_partition_of_the_handle(make_topic: Any) -> None:
    # Client errors come once per handle; each partition must still see them (its
    # stats and health), not only the one that happened to poll.
    from thalweg_bytewax.testing import MockCluster

    cluster = MockCluster().start()
    topic = make_topic()
    try:
        for p in (0, 1):
            fill(cluster.bootstrap, topic, n=3, partition=p)
        source = KafkaSource([cluster.bootstrap], [topic])
        parts = [source.build_part("in", f"{topic}:{p}", None) for p in (0, 1)]
        assert parts[0]._native.client is parts[1]._native.client  # noqa: SLF001
        assert [len(_offsets(part, 3)) for part in parts] == [3, 3]
    finally:
        cluster.stop()
    try:
        deadline = time.monotonic() + 20
        while min(p.stats.transient_errors for p in parts) == 0 and time.monotonic() < deadline:
            for part in parts:
                assert part.next_batch() == []  # never raises for an outage
            time.sleep(0.05)
        assert [p.stats.transient_errors > 0 for p in parts] == [True, True]
    finally:
        for part in parts:
            part.close()


def test_an_internal_failure_of_the_native_consume_is_a_source_error_naming_the_partition(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    topic = make_topic()
    fill(kafka_bootstrap, topic, partition=0)
    part = KafkaSource([kafka_bootstrap], [topic], tail=False).build_part("in", f"{topic}:0", None)
    part._native.close()  # noqa: SLF001 - the handle gone under the partition
    with pytest.raises(SourceError, match=rf"partition {topic}:0: the native consume failed") as info:
        part.next_batch()
    assert "THALWEG_KAFKA_CONSUME=pure" in str(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)
    part.close()
