"""The native batch consume builds exactly the RawBatches the pure path builds.

Differential: the same partitions read once through confluent-kafka ``Message`` objects
(``raw_batch_from_messages``) and once through ``thalweg_bytewax._kafka_native``
(``raw_batch_from_native``) give equal batches, field by field, on the fidelity corpus
(null vs empty keys and values, 0 / 1 / 200 headers, duplicate and null headers, small,
large and broker-set timestamps, leader epochs, non-UTF-8 bytes, a 1 MiB value) and on
transactional partitions (control records and transaction markers skipped). The whole
fidelity suite then runs with the native path forced.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import tests.connectors.kafka.test_kafka_fidelity as fidelity
from tests.fixtures.kafka import create_topic, real_broker
from thalweg_bytewax.connectors.kafka import _native
from thalweg_bytewax.connectors.kafka._config import consumer_config
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.kafka_batches import raw_batch_from_messages, raw_batch_from_native
from thalweg_bytewax.records.kafka_concat import concat_native, concat_raw_batches
from thalweg_bytewax.testing import produce

pytestmark = pytest.mark.skipif(
    _native._load()[0] is None,  # noqa: SLF001 - tests of the private module
    reason="the native consume extension is not built",
)

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def _pure(
    bootstrap: str, topic: str, partition: int, expected: int, extra: dict[str, Any] | None = None
) -> pa.Table:
    settings = consumer_config([bootstrap], extra or None)
    c = Consumer(settings)
    c.assign([TopicPartition(topic, partition, 0)])
    batches: list[pa.RecordBatch] = []
    deadline = time.monotonic() + 30
    try:
        while (got := sum(b.num_rows for b in batches)) < expected and time.monotonic() < deadline:
            # At most what is left: `consume` waits out its timeout while it holds fewer.
            msgs = [
                m for m in c.consume(min(1000, expected - got), timeout=0.2) if m.error() is None
            ]
            if msgs:
                batches.append(raw_batch_from_messages(msgs, cluster="c", ingest_ts=NOW))
    finally:
        c.close()
    return pa.Table.from_batches(batches)


def _native_read(
    bootstrap: str,
    topic: str,
    partition: int,
    expected: int,
    *,
    max_records: int = 1000,
    max_bytes: int = 1 << 30,
    extra: dict[str, Any] | None = None,
) -> tuple[pa.Table, list[int]]:
    c = _native.open_native(consumer_config([bootstrap], extra or None))
    c.assign(topic, partition, 0, -1)
    batches: list[pa.RecordBatch] = []
    sizes: list[int] = []
    deadline = time.monotonic() + 30
    try:
        while sum(b.num_rows for b in batches) < expected and time.monotonic() < deadline:
            out = c.consume(max_records, max_bytes)
            assert out[-1] == [], out[-1]
            if out[0]:
                batch = raw_batch_from_native(
                    out, topic=topic, partition=partition, cluster="c", ingest_ts=NOW
                )
                batches.append(batch)
                sizes.append(batch.num_rows)
            else:
                time.sleep(0.02)
        assert c.take_client_error() is None
    finally:
        c.close()
    return pa.Table.from_batches(batches), sizes


def _assert_same(pure: pa.Table, native: pa.Table) -> None:
    assert native.schema == pure.schema
    assert native.num_rows == pure.num_rows
    for name in pure.schema.names:
        assert native.column(name).combine_chunks().equals(pure.column(name).combine_chunks()), name


@pytest.fixture(scope="module")
def corpus_topic(kafka_bootstrap: str) -> tuple[str, dict[int, int]]:
    topic = f"native-fidelity-{uuid.uuid4().hex[:8]}"
    if real_broker():
        create_topic(kafka_bootstrap, topic, config=fidelity.TOPIC_CONFIG)
    recs = fidelity.corpus()
    produce(kafka_bootstrap, topic, recs)
    counts = {p: sum(1 for r in recs if r["partition"] == p) for p in (0, 1)}
    return topic, counts


@pytest.mark.parametrize("partition", [0, 1])
def test_native_batches_equal_pure_batches_on_the_fidelity_corpus(
    kafka_bootstrap: str, corpus_topic: tuple[str, dict[int, int]], partition: int
) -> None:
    topic, counts = corpus_topic
    pure = _pure(kafka_bootstrap, topic, partition, counts[partition])
    native, _ = _native_read(kafka_bootstrap, topic, partition, counts[partition])
    assert pure.num_rows == counts[partition]
    _assert_same(pure, native)
    # The corpus' edge values really are in there.
    keys = native.column("_twg_source_key").to_pylist()
    values = native.column("_twg_source_value").to_pylist()
    if partition == 0:  # the null key and the tombstone
        assert None in keys and None in values
    else:  # the empty key and the empty value
        assert b"" in keys and b"" in values
    assert native.column("_twg_source_leader_epoch").null_count == 0


def _native_pieces(bootstrap: str, topic: str, partition: int, expected: int) -> list[Any]:
    """The partition's records as the native consume returns them, three at a time."""
    c = _native.open_native(consumer_config([bootstrap], None))
    c.assign(topic, partition, 0, -1)
    pieces: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while sum(p[0] for p in pieces) < expected and time.monotonic() < deadline:
            out = c.consume(3, 1 << 30)
            if out[0]:
                pieces.append(out)
            else:
                time.sleep(0.02)
    finally:
        c.close()
    return pieces


@pytest.mark.parametrize("partition", [0, 1])
def test_gathered_consumes_build_the_batch_the_pure_path_builds(
    kafka_bootstrap: str, corpus_topic: tuple[str, dict[int, int]], partition: int
) -> None:
    # A partition gathers small polls into one batch: the columns of many consumes,
    # joined, must give every null, empty value, header and epoch of the corpus.
    topic, counts = corpus_topic
    pure = _pure(kafka_bootstrap, topic, partition, counts[partition])
    pieces = _native_pieces(kafka_bootstrap, topic, partition, counts[partition])
    assert len(pieces) > 2, "the corpus was expected over several consumes"  # noqa: PLR2004
    gathered = raw_batch_from_native(
        concat_native(pieces), topic=topic, partition=partition, cluster="c", ingest_ts=NOW
    )
    _assert_same(pure, pa.Table.from_batches([gathered]))
    one_by_one = [
        raw_batch_from_native(p, topic=topic, partition=partition, cluster="c", ingest_ts=NOW)
        for p in pieces
    ]
    assert concat_raw_batches(one_by_one).equals(gathered)
    assert concat_raw_batches(one_by_one).equals(pa.concat_batches(one_by_one))


def test_byte_and_record_budgets_split_batches_without_losing_a_record(
    kafka_bootstrap: str, corpus_topic: tuple[str, dict[int, int]]
) -> None:
    topic, counts = corpus_topic
    pure = _pure(kafka_bootstrap, topic, 0, counts[0])
    # 1 byte: one message per batch, the rest waits in the native consumer.
    one_each, sizes = _native_read(kafka_bootstrap, topic, 0, counts[0], max_bytes=1)
    assert set(sizes) == {1}
    _assert_same(pure, one_each)
    three, sizes = _native_read(kafka_bootstrap, topic, 0, counts[0], max_records=3)
    assert max(sizes) <= 3
    _assert_same(pure, three)


def test_transaction_markers_and_aborted_records_are_read_alike(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    topic = make_topic()
    p = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": uuid.uuid4().hex})
    p.init_transactions(30)
    for i, commit in enumerate([True, False, True]):
        p.begin_transaction()
        for j in range(5):
            p.produce(topic, value=f"{i}-{j}".encode(), partition=0, headers=[("t", b"x")])
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    for level in ("read_committed", "read_uncommitted"):
        extra = {"isolation.level": level}
        pure = _pure(kafka_bootstrap, topic, 0, 10, extra)
        native, _ = _native_read(kafka_bootstrap, topic, 0, 10, extra=extra)
        _assert_same(pure, native)
        offsets = native.column("_twg_source_offset").to_pylist()
        # Markers occupy offsets but are never records.
        assert offsets == sorted(offsets)
        assert offsets[-1] + 1 > len(offsets)


def test_an_event_between_records_leaves_each_record_its_own_headers(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    """One consume returns records, the end-of-partition event, then records with headers.

    The event is returned beside the columns, not as a row, so the rows after it are
    packed one place earlier than librdkafka returned them: their headers must follow.
    """
    topic = make_topic()
    # The mock cluster creates a topic on its first record: a partition assigned before
    # that is fetched only once the client's metadata is refreshed (about 0.9 s). A
    # record on another partition creates it; partition 0 stays empty until below.
    produce(kafka_bootstrap, topic, [{"value": b"elsewhere", "partition": 1}])
    # The broker holds a fetch that finds nothing for `fetch.wait.max.ms` (500 ms by
    # default): 10 ms here, so the end-of-partition event follows the records at once.
    settings = {"enable.partition.eof": True, "fetch.wait.max.ms": 10}
    c = _native.open_native(consumer_config([kafka_bootstrap], settings))
    c.assign(topic, 0, 0, -1)

    def fetched_up_to(high: int) -> None:
        # What the fetcher has read: the cached high watermark comes with the fetch reply
        # that queues the records; the end-of-partition event follows them (the reply or
        # the next fetch's, within fetch.wait.max.ms).
        deadline = time.monotonic() + 30
        while c.watermarks(topic, 0)[1] < high:
            assert time.monotonic() < deadline, f"the partition was not fetched up to {high}"
            time.sleep(0.02)
        # The end-of-partition event behind them: the same 0.49 s beyond the fetch wait as
        # a 1 s sleep gave at the default 500 ms.
        time.sleep(0.5)

    try:
        # The first consume assigns the partition. Nothing is produced to it before, so
        # however late it runs, the records cannot be taken here instead of below; the
        # empty partition's own end-of-partition event (at 0) is taken here.
        deadline = time.monotonic() + 30
        while True:
            first = c.consume(1000, 1 << 30)
            assert first[0] == 0
            if [(code, offset) for code, _text, offset in first[-1]] == [(-191, 0)]:
                break
            assert first[-1] == [], first[-1]
            assert time.monotonic() < deadline, "no end-of-partition event for the empty partition"
            time.sleep(0.02)
        produce(kafka_bootstrap, topic, [{"value": b"a%d" % i, "partition": 0} for i in range(3)])
        fetched_up_to(3)  # the three records and the end-of-partition event are queued
        with_headers = [
            {"value": b"b%d" % i, "partition": 0, "headers": [("h", b"%d" % i), ("n", None)]}
            for i in range(3)
        ]
        produce(kafka_bootstrap, topic, with_headers)
        fetched_up_to(6)  # and then these three
        out = c.consume(1000, 1 << 30)
    finally:
        c.close()
    n, errors = out[0], out[-1]
    assert n == 6, "the six records were expected in one consume"  # noqa: PLR2004
    eof = -191  # _PARTITION_EOF, after each group of three
    assert [(code, offset) for code, _text, offset in errors] == [(eof, 3), (eof, 6)]
    batch = raw_batch_from_native(out, topic=topic, partition=0, cluster="c", ingest_ts=NOW)
    values = [b"a0", b"a1", b"a2", b"b0", b"b1", b"b2"]
    assert batch.column("_twg_source_value").to_pylist() == values
    headers = batch.column("_twg_source_headers").to_pylist()
    assert headers[:3] == [[], [], []]
    assert [[(h["key"], h["value"]) for h in row] for row in headers[3:]] == [
        [("h", b"%d" % i), ("n", None)] for i in range(3)
    ]


@pytest.mark.parametrize(
    "test",
    [
        fidelity.test_every_field_of_every_record_survives,
        fidelity.test_empty_topic_partitions_end_cleanly,
        fidelity.test_batches_respect_the_byte_budget,
    ],
    ids=lambda t: t.__name__,
)
@pytest.mark.parametrize("mode", ["native", "pure"])
def test_the_fidelity_suite_passes_on_both_paths(
    test: Any,
    mode: str,
    kafka_bootstrap: str,
    make_topic: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(_native.CONSUME_ENV, mode)
    monkeypatch.setitem(_native._state, "logged", set())  # noqa: SLF001 - log once per test
    caplog.set_level(logging.INFO, logger=_native.__name__)
    if test is fidelity.test_every_field_of_every_record_survives:
        test(kafka_bootstrap, tmp_path)
    else:
        test(kafka_bootstrap, make_topic, tmp_path)
    said = "native batch consume" if mode == "native" else "confluent-kafka messages"
    assert any(said in r.getMessage() for r in caplog.records)


def test_an_unknown_consume_mode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_native.CONSUME_ENV, "fast")
    with pytest.raises(ConfigError, match=r"`THALWEG_KAFKA_CONSUME` expected one of .*got 'fast'"):
        _native.use_native({})


def test_python_callbacks_in_the_settings_fall_back_or_fail_when_forced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = {"oauth_cb": lambda _cfg: ("token", 0.0)}
    monkeypatch.setenv(_native.CONSUME_ENV, "auto")
    assert _native.use_native(settings) is False
    monkeypatch.setenv(_native.CONSUME_ENV, "native")
    with pytest.raises(ConfigError, match=r"Python callbacks \(oauth_cb\)"):
        _native.use_native(settings)


def test_a_refused_setting_is_named_without_its_value() -> None:
    settings = consumer_config(["localhost:9"], {"fetch.wait.max.ms": "s3cr3t-value"})
    with pytest.raises(ConfigError, match=r"`fetch.wait.max.ms`") as info:
        _native.open_native(settings)
    assert "s3cr3t" not in str(info.value)
