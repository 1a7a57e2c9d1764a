"""Kill a Kafka -> decode -> KafkaSink flow at named points, resume: every record once.

Runs ``python -m bytewax.run tests.recovery.kafka_sink_flow`` through the ``crash``
harness (tests/fixtures/crash.py) on a recovery store, SIGKILLs it at a fault-injection point (before the epoch's flush,
after the flush before the snapshot returns, in the middle of an epoch's produce
calls) or from outside, starts it again and reads the output topic with a plain
consumer: every input record appears exactly once (by its source locator and record
id headers). A broker that stops answering fails the epoch loudly after the delivery
timeout with a bounded local queue, and nothing is lost on resume.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.connectors.kafka.kafka_sink_helpers import Out, read_topic
from tests.fixtures.crash import CrashableFlow, CrashHarness
from thalweg_bytewax.connectors.kafka import KafkaSink
from thalweg_bytewax.errors import SinkTransientError
from thalweg_bytewax.records.ids import record_ids_array
from thalweg_bytewax.testing import produce

pytestmark = pytest.mark.slow

PARTITIONS = 4
PER_PARTITION = 1500


def fill(bootstrap: str, topic: str) -> set[tuple[int, int]]:
    produce(
        bootstrap,
        topic,
        [
            {"value": json.dumps({"id": f"o-{p}-{i}", "n": i}).encode(), "partition": p}
            for i in range(PER_PARTITION)
            for p in range(PARTITIONS)
        ],
    )
    return {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}


def kafka_sink_flow(
    crash: CrashHarness, bootstrap: str, src: str, out: str, **extra: str
) -> CrashableFlow:
    """``tests.recovery.kafka_sink_flow`` from ``src`` to ``out`` on the test's recovery
    store, a snapshot every second, throttled so that a kill falls mid-stream."""
    env = {
        "THALWEG_BOOTSTRAP_SERVERS": bootstrap,
        "THALWEG_TOPICS": src,
        "THALWEG_OUTPUT_TOPIC": out,
        "THALWEG_BATCH_SIZE": "200",
        "THALWEG_MAX_RECORDS_PER_S": "1000",
        **extra,
    }
    return crash.flow("tests.recovery.kafka_sink_flow", env=env, snapshot_s=1, timeout_s=180)


def assert_exactly_once(records: list[Out], src: str, expected: set[tuple[int, int]]) -> None:
    seen = Counter((r.locator[1], r.locator[2]) for r in records)
    dupes = {k: v for k, v in seen.items() if v > 1}
    assert not dupes, f"{len(dupes)} records twice in the output, e.g. {sorted(dupes)[:5]}"
    missing = expected - set(seen)
    assert not missing, f"{len(missing)} records missing, e.g. {sorted(missing)[:5]}"
    assert set(seen) == expected
    for r in records[:50]:
        topic, p, o = r.locator
        assert topic == src and r.value == f"o-{p}-{o}".encode() and r.key == str(o).encode()
        assert r.record_id is not None


@pytest.mark.parametrize(
    "fault",
    ["epoch_sink.before_commit:3", "epoch_sink.after_commit:3", "kafka_sink.mid_epoch:5"],
)
def test_sigkill_at_a_named_point_then_resume_is_exactly_once(
    crash: CrashHarness, kafka_bootstrap: str, make_topic: Any, fault: str
) -> None:
    src, out = make_topic(), make_topic()
    expected = fill(kafka_bootstrap, src)
    flow = kafka_sink_flow(crash, kafka_bootstrap, src, out)
    flow.killed_at(fault)
    before = len(read_topic(kafka_bootstrap, out))
    assert 0 < before < len(expected), "the crash should fall mid-stream"
    flow.finishes()
    assert_exactly_once(read_topic(kafka_bootstrap, out), src, expected)


def test_external_sigkill_at_arbitrary_moments_then_resume(
    crash: CrashHarness, kafka_bootstrap: str, make_topic: Any
) -> None:
    src, out = make_topic(), make_topic()
    expected = fill(kafka_bootstrap, src)
    flow = kafka_sink_flow(crash, kafka_bootstrap, src, out)
    for delay in (2.5, 1.8):
        proc = flow.start()
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    flow.finishes()
    assert_exactly_once(read_topic(kafka_bootstrap, out), src, expected)


def _batch(partition: int, offsets: range, topic: str = "src") -> pa.RecordBatch:
    values = pa.array([f"v{o}".encode() * 8 for o in offsets], pa.binary())
    offs = pa.array(list(offsets), pa.int64())
    n = len(offsets)
    return pa.RecordBatch.from_pydict(
        {
            "_twg_source_topic": pa.array([topic] * n),
            "_twg_source_partition": pa.array([partition] * n, pa.int32()),
            "_twg_source_offset": offs,
            "_twg_source_value": values,
            "_twg_record_id": record_ids_array(None, topic, partition, offs, values),
        }
    )


def test_a_stalled_broker_fails_loudly_with_a_bounded_queue_and_loses_nothing(
    tmp_path: Path,
) -> None:
    # A broker of our own, so that it can be frozen (SIGSTOP) without the shared one.
    broker = subprocess.Popen(
        [sys.executable, "-m", "thalweg_bytewax.dev._mock_broker", "--wait-stdin"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert broker.stdout is not None
        bootstrap = broker.stdout.readline().split(" ", 1)[1].strip()
        sink = KafkaSink(
            [bootstrap],
            "out",
            shards=1,
            queue_max_messages=500,
            delivery_timeout=timedelta(seconds=3),
            metadata_timeout=timedelta(seconds=5),
            unreachable_timeout=timedelta(seconds=1),
        )
        part = sink.build_part("flow.out", "shard-000", None)
        part.write_batch([_batch(0, range(300))])
        state = part.snapshot()
        other = KafkaSink(
            [bootstrap],
            "out",
            shards=2,
            delivery_timeout=timedelta(seconds=2),
            unreachable_timeout=timedelta(seconds=1),
        )
        shard1 = other.build_part("flow.out", "shard-001", None)
        p1 = next(p for p in range(50) if other.part_fn(f"two:{p}") == 1)
        shard1.write_batch([_batch(p1, range(10), "two")])
        state1 = shard1.snapshot()
        os.kill(broker.pid, signal.SIGSTOP)  # the broker stops answering

        # The write waits for room as long as a record may wait for its acknowledgement
        # (`delivery_timeout` + `unreachable_timeout`), then fails naming that bound.
        with pytest.raises(
            SinkTransientError,
            match=r"kafka sink `out`: the local producer queue stayed full for 4 s",
        ):
            part.write_batch([_batch(0, range(300, 3300))])  # more than the queue holds
        assert part.stats.queue_full_waits == 1 and part.failed
        part.close()

        # Records that fit the queue expire at the delivery timeout: the epoch's commit
        # fails naming the topic and partition.
        shard1.write_batch([_batch(p1, range(10, 100), "two")])
        with pytest.raises(SinkTransientError, match=r"records failed delivery, the first to `out:"):
            shard1.snapshot()
        shard1.close()
        # A sink partition built while the broker is frozen fails after the timeout.
        with pytest.raises(SinkTransientError, match=r"could not reach the brokers within 5 s"):
            sink.build_part("flow.out", "shard-000", None)

        os.kill(broker.pid, signal.SIGCONT)
        resumed = sink.build_part("flow.out", "shard-000", state)
        resumed.write_batch([_batch(0, range(300, 3300))])
        resumed.snapshot()
        resumed.close()
        # Records that timed out locally may still have reached the broker; the resumed
        # shard finds them in the topic and writes only the others.
        resumed1 = other.build_part("flow.out", "shard-001", state1)
        resumed1.write_batch([_batch(p1, range(10, 100), "two")])
        resumed1.snapshot()
        resumed1.close()
        got = Counter(r.locator for r in read_topic(bootstrap, "out"))
        assert max(got.values()) == 1
        assert set(got) == {("src", 0, o) for o in range(3300)} | {
            ("two", p1, o) for o in range(100)
        }
    finally:
        os.kill(broker.pid, signal.SIGCONT)
        assert broker.stdin is not None
        broker.stdin.close()
        broker.terminate()
        broker.wait(timeout=10)
        if broker.stdout is not None:
            broker.stdout.close()
