"""Brokers restarted under a running flow, on Apache Kafka: the flow pauses, nothing lost.

A Kafka -> decode -> KafkaSink flow runs under ``python -m bytewax.run`` while one node
of a 3-node cluster is SIGKILLed and started again with its data, or while a single
node is: the source and the sink (plain and transactional) wait for the brokers
(``unreachable_timeout``) instead of failing an epoch, the run completes in one go, and
the output topic holds every input record exactly once (for ``read_committed`` with
transactions). A bounded raw-lane run whose only broker is gone for good fails in
bounded time (``unreachable_timeout``), naming the partition and the brokers. The
sink's end-offset read waits for the only node to restart, although its client forgot
the node meanwhile. Each test starts a private cluster (``apache_kafka_factory``) so that
the shared one stays up.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.connectors.kafka.kafka_sink_helpers import read_topic
from tests.fixtures.crash import CrashHarness
from tests.fixtures.kafka import create_topic, topic_name
from tests.recovery.test_kafka_sink_crash import assert_exactly_once, fill, kafka_sink_flow
from thalweg_bytewax.connectors.kafka._sink_offsets import end_offsets
from thalweg_bytewax.dev._apache_kafka import ApacheKafka
from thalweg_bytewax.testing import produce

pytestmark = pytest.mark.slow


def written(bootstrap: str, topic: str) -> int:
    """How many records ``topic`` holds (the sum of its partitions' high watermarks)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "log_level": 0})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        tps = [TopicPartition(topic, p) for p in parts]
        return sum(consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps)
    finally:
        consumer.close()


def run_through_a_restart(
    kafka: ApacheKafka,
    request: pytest.FixtureRequest,
    crash: CrashHarness,
    node: int,
    *,
    transactional: bool,
) -> None:
    src, out = topic_name(request), topic_name(request)
    create_topic(kafka.bootstrap, src)
    create_topic(kafka.bootstrap, out)
    expected = fill(kafka.bootstrap, src)
    # 200 records/s per partition: about 7.5 s of reading, so the restart falls mid-run.
    throttled = {
        "THALWEG_MAX_RECORDS_PER_S": "200",
        "THALWEG_TRANSACTIONAL": "1" if transactional else "0",
    }
    # stderr to a file: a pipe nobody reads while the broker restarts would fill with
    # the client's connection errors and stall the flow on its writes.
    log = crash.root / "flow.stderr"
    proc = kafka_sink_flow(crash, kafka.bootstrap, src, out, **throttled).start(stderr=log)
    try:
        # Restarted once the flow has committed output, so that it falls mid-run.
        deadline = time.monotonic() + 120
        while not written(kafka.bootstrap, out):
            assert time.monotonic() < deadline and proc.poll() is None, "no output yet"
            time.sleep(0.2)
        assert proc.poll() is None, "the flow ended before the broker restart"
        kafka.stop_node(node, kill=True)
        time.sleep(2.0)
        assert proc.poll() is None, "the flow ended while the broker was down"
        kafka.start_node(node)
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # The run pauses while the broker is away and completes: no epoch failed.
    assert proc.returncode == 0, log.read_text(errors="replace")[-3000:]
    isolation = "read_committed" if transactional else "read_uncommitted"
    records = read_topic(kafka.bootstrap, out, isolation=isolation, timeout=60)
    assert_exactly_once(records, src, expected)


@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
def test_one_of_three_brokers_restarted_mid_run_pauses_the_flow_and_loses_nothing(
    apache_kafka_factory: Callable[..., ApacheKafka],
    request: pytest.FixtureRequest,
    crash: CrashHarness,
    transactional: bool,
) -> None:
    kafka = apache_kafka_factory(nodes=3, heap_mb=320)
    # The killed node's partitions have no leader until the controller notices (about
    # 10 s), longer than `metadata_timeout`: the sink's requests wait for the new leader.
    run_through_a_restart(kafka, request, crash, node=1, transactional=transactional)


@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
def test_the_single_broker_restarted_mid_run_pauses_the_flow_and_loses_nothing(
    apache_kafka_factory: Callable[..., ApacheKafka],
    request: pytest.FixtureRequest,
    crash: CrashHarness,
    transactional: bool,
) -> None:
    kafka = apache_kafka_factory(nodes=1)
    run_through_a_restart(kafka, request, crash, node=0, transactional=transactional)


def test_the_sinks_end_offsets_wait_for_the_single_broker_to_restart(
    apache_kafka_factory: Callable[..., ApacheKafka],
    request: pytest.FixtureRequest,
) -> None:
    # With its only broker gone, the client forgets it (a re-bootstrap) while its cache
    # still names it as every partition's leader: the read failed at once with
    # `_UNKNOWN_PARTITION` instead of waiting for the broker, failing the sink's epoch.
    kafka = apache_kafka_factory(nodes=1)
    out = topic_name(request)
    create_topic(kafka.bootstrap, out)
    produce(kafka.bootstrap, out, [{"value": b"x", "partition": i % 4} for i in range(40)])
    ends = dict.fromkeys(range(4), 10)
    reader = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "unused", "log_level": 0})
    try:
        assert end_offsets(reader, out, [0, 1, 2, 3], 60, "sink") == ends
        kafka.stop_node(0, kill=True)
        time.sleep(1.0)  # the reader's connection drops: it re-bootstraps
        kafka.start_node(0, wait=False)
        started = time.monotonic()
        assert end_offsets(reader, out, [0, 1, 2, 3], 60, "sink") == ends
        # It waited for the broker to come back (seconds), not answered from a cache.
        assert time.monotonic() - started > 1.0
    finally:
        reader.close()


def test_a_bounded_run_whose_brokers_are_all_gone_fails_in_bounded_time(
    apache_kafka_factory: Callable[..., ApacheKafka],
    request: pytest.FixtureRequest,
    crash: CrashHarness,
) -> None:
    kafka = apache_kafka_factory(nodes=1)
    topic = topic_name(request)
    # One partition of 30 MB: far more than librdkafka prefetches (4 MiB), so records
    # remain unfetched when the broker goes.
    create_topic(kafka.bootstrap, topic, partitions=1)
    for _ in range(6):
        produce(kafka.bootstrap, topic, [{"value": b"x" * 10_000, "partition": 0}] * 500)
    lane = crash.root / "lane"
    env = {
        "THALWEG_BOOTSTRAP_SERVERS": kafka.bootstrap,
        "THALWEG_TOPICS": topic,
        "THALWEG_RAW_LANE": str(lane),
        "THALWEG_TAIL": "0",
        "THALWEG_BATCH_SIZE": "100",
        "THALWEG_MAX_RECORDS_PER_S": "200",
    }
    log = crash.root / "flow.stderr"
    proc = crash.flow("flows.raw_lane", env=env, snapshot_s=1).start(stderr=log)
    try:
        # The broker goes once the run has committed an epoch to the lane: mid-run.
        deadline = time.monotonic() + 120
        while not list(lane.rglob("*.parquet")):
            assert time.monotonic() < deadline and proc.poll() is None, "no lane file yet"
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before the broker went away"
        kafka.stop_node(0, kill=True)
        proc.wait(timeout=240)  # a run that never gave up fails the test here
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    text = log.read_text(errors="replace")
    assert proc.returncode != 0
    assert "SourceError" in text and f"`{topic}:" in text, text[-3000:]
    # It gave up at the `unreachable_timeout` bound, which the error names.
    assert "(the brokers unreachable)" in text, text[-3000:]
    assert "raise `unreachable_timeout`" in text, text[-3000:]
