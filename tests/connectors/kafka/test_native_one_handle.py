"""With the native consume, a partition built after the listing opens one librdkafka handle.

The confluent-kafka consumer only answers questions the listing answered already
(metadata, watermarks), so it is opened only when asked; the partition still reads every
record, and a lookup the listing cannot answer (a start by timestamp) opens it and
starts where the pure path starts.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from thalweg_bytewax.connectors.kafka import KafkaSource, _native
from thalweg_bytewax.testing import produce

pytestmark = pytest.mark.skipif(
    _native._load()[0] is None,  # noqa: SLF001 - tests of the private module
    reason="the native consume extension is not built",
)


def _drain(part: Any, expected: int) -> int:
    rows = 0
    deadline = time.monotonic() + 30
    while rows < expected and time.monotonic() < deadline:
        try:
            batches = part.next_batch()
        except StopIteration:
            break
        rows += sum(b.num_rows for _, b in batches)
        if not batches:
            time.sleep(0.01)
    return rows


def _opened(part: Any) -> bool:
    lazy = part._consumer  # noqa: SLF001 - a LazyConsumer under the native consume
    return bool(lazy.opened)


def _records(n: int) -> list[dict[str, Any]]:
    return [{"key": b"k", "value": b"v%d" % i, "partition": i % 4} for i in range(n)]


def test_listed_partitions_open_no_second_consumer(
    kafka_bootstrap: str, make_topic: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_native.CONSUME_ENV, "native")
    topic = make_topic()
    produce(kafka_bootstrap, topic, _records(40))
    source = KafkaSource([kafka_bootstrap], [topic], tail=False)
    parts = [source.build_part("s.in", key, None) for key in source.list_parts()]
    try:
        assert [_opened(p) for p in parts] == [False] * 4
        assert sum(_drain(p, 10) for p in parts) == 40
        assert [_opened(p) for p in parts] == [False] * 4
    finally:
        for p in parts:
            p.close()


def test_a_start_by_timestamp_opens_the_consumer_and_starts_where_pure_does(
    kafka_bootstrap: str, make_topic: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, _records(8))
    start = datetime(2000, 1, 1, tzinfo=UTC)
    starts = {}
    for mode in ("native", "pure"):
        monkeypatch.setenv(_native.CONSUME_ENV, mode)
        source = KafkaSource([kafka_bootstrap], [topic], tail=False, starting_offset=start)
        part = source.build_part("s.in", source.list_parts()[0], None)
        try:
            if mode == "native":
                assert _opened(part)  # offsets_for_times asked it
            starts[mode] = part.snapshot()
        finally:
            part.close()
    assert starts["native"] == starts["pure"]
