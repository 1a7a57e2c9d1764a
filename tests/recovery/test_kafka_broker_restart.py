"""Brokers restarted under a running flow, on Apache Kafka: the flow pauses, nothing lost.

A Kafka -> decode -> KafkaSink flow runs under ``python -m bytewax.run`` while one node
of a 3-node cluster is SIGKILLed and started again with its data, or while a single
node is: the source and the sink (plain and transactional) wait for the brokers
(``unreachable_timeout``) instead of failing an epoch, the run completes in one go, and
the output topic holds every input record exactly once (for ``read_committed`` with
transactions). A bounded raw-lane run whose only broker is gone for good fails in
bounded time (``unreachable_timeout``), naming the partition and the brokers. Each test
starts a private cluster (``apache_kafka_factory``) so that the shared one stays up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.connectors.kafka.kafka_sink_helpers import read_topic
from tests.fixtures.kafka import create_topic, topic_name
from tests.recovery.test_kafka_sink_crash import (
    ROOT,
    assert_exactly_once,
    cmd,
    fill,
    flow_env,
    init_recovery,
)
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
    tmp_path: Path,
    node: int,
    *,
    transactional: bool,
) -> None:
    src, out = topic_name(request), topic_name(request)
    create_topic(kafka.bootstrap, src)
    create_topic(kafka.bootstrap, out)
    expected = fill(kafka.bootstrap, src)
    recovery = init_recovery(tmp_path / "recovery")
    # 200 records/s per partition: about 7.5 s of reading, so the restart falls mid-run.
    env = flow_env(
        kafka.bootstrap,
        src,
        out,
        THALWEG_MAX_RECORDS_PER_S="200",
        THALWEG_TRANSACTIONAL="1" if transactional else "0",
    )
    # stderr to a file: a pipe nobody reads while the broker restarts would fill with
    # the client's connection errors and stall the flow on its writes.
    log = tmp_path / "flow.stderr"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            cmd(recovery), env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sink
        )
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
    tmp_path: Path,
    transactional: bool,
) -> None:
    kafka = apache_kafka_factory(nodes=3, heap_mb=320)
    # The killed node's partitions have no leader until the controller notices (about
    # 10 s), longer than `metadata_timeout`: the sink's requests wait for the new leader.
    run_through_a_restart(kafka, request, tmp_path, node=1, transactional=transactional)


@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
def test_the_single_broker_restarted_mid_run_pauses_the_flow_and_loses_nothing(
    apache_kafka_factory: Callable[..., ApacheKafka],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    transactional: bool,
) -> None:
    kafka = apache_kafka_factory(nodes=1)
    run_through_a_restart(kafka, request, tmp_path, node=0, transactional=transactional)


def test_a_bounded_run_whose_brokers_are_all_gone_fails_in_bounded_time(
    apache_kafka_factory: Callable[..., ApacheKafka],
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    kafka = apache_kafka_factory(nodes=1)
    topic = topic_name(request)
    # One partition of 30 MB: far more than librdkafka prefetches (4 MiB), so records
    # remain unfetched when the broker goes.
    create_topic(kafka.bootstrap, topic, partitions=1)
    for _ in range(6):
        produce(kafka.bootstrap, topic, [{"value": b"x" * 10_000, "partition": 0}] * 500)
    recovery = init_recovery(tmp_path / "recovery")
    env = {k: v for k, v in os.environ.items() if k != "THALWEG_FAULT"}
    env.update(
        {
            "THALWEG_BOOTSTRAP_SERVERS": kafka.bootstrap,
            "THALWEG_TOPICS": topic,
            "THALWEG_RAW_LANE": str(tmp_path / "lane"),
            "THALWEG_TAIL": "0",
            "THALWEG_BATCH_SIZE": "100",
            "THALWEG_MAX_RECORDS_PER_S": "200",
        }
    )
    command = [sys.executable, "-m", "bytewax.run", "flows.raw_lane"]
    command += ["-r", str(recovery), "-s", "1", "-b", "0"]
    log = tmp_path / "flow.stderr"
    with log.open("wb") as sink:
        proc = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sink)
    try:
        # The broker goes once the run has committed an epoch to the lane: mid-run.
        deadline = time.monotonic() + 120
        while not list((tmp_path / "lane").rglob("*.parquet")):
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
