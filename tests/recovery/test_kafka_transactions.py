"""KafkaSink(transactional=True) on Apache Kafka: exactly once for read_committed, zombies fenced.

librdkafka's mock cluster accepts transactions but neither filters aborted records for
``read_committed`` consumers nor fences an older producer of the same transactional id,
so these tests run on Apache Kafka only (``apache_kafka``). A Kafka -> decode ->
``KafkaSink(transactional=True)`` flow is SIGKILLed at seeded random moments and resumed;
the output topic read with ``read_committed`` then holds every input record exactly
once, while a ``read_uncommitted`` reader may see the aborted attempts too. A zombie (an
older producer of the same shard that resumes after a new one took over) is fenced:
its commit fails and none of its records becomes visible to ``read_committed``.
"""

from __future__ import annotations

import random
import re
import signal
import time
from collections import Counter
from datetime import timedelta

import pytest
from confluent_kafka import Producer

from tests.connectors.kafka.kafka_sink_helpers import read_topic
from tests.fixtures.crash import CrashHarness
from tests.fixtures.kafka import create_topic, topic_name
from tests.recovery.test_kafka_sink_crash import _batch, assert_exactly_once, fill, kafka_sink_flow
from thalweg_bytewax.connectors.kafka import KafkaSink
from thalweg_bytewax.dev._apache_kafka import ApacheKafka
from thalweg_bytewax.errors import SinkError, SinkTransientError
from thalweg_bytewax.runtime.parts import encode_part, stable_route
from thalweg_bytewax.runtime.sharded_sink import shard_name

pytestmark = pytest.mark.slow


def topics(kafka: ApacheKafka, request: pytest.FixtureRequest) -> tuple[str, str]:
    src, out = topic_name(request), topic_name(request)
    create_topic(kafka.bootstrap, src)
    create_topic(kafka.bootstrap, out)
    return src, out


def test_sigkill_at_random_moments_then_resume_is_exactly_once_for_read_committed(
    apache_kafka: ApacheKafka, request: pytest.FixtureRequest, crash: CrashHarness
) -> None:
    bootstrap = apache_kafka.bootstrap
    src, out = topics(apache_kafka, request)
    expected = fill(bootstrap, src)
    # 200 records/s per partition: about 7.5 s of reading, so each kill falls mid-run.
    fast = {"THALWEG_TRANSACTIONAL": "1", "THALWEG_MAX_RECORDS_PER_S": "200"}
    flow = kafka_sink_flow(crash, bootstrap, src, out, **fast)
    rng = random.Random(20)
    for _ in range(2):
        proc = flow.start()
        time.sleep(rng.uniform(2.5, 4.5))  # past start-up, inside some epoch's transaction
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        killed_with = len(read_topic(bootstrap, out, isolation="read_committed"))
        assert killed_with < len(expected), "the kill should fall mid-run"
    flow.finishes()
    committed = read_topic(bootstrap, out, isolation="read_committed")
    assert_exactly_once(committed, src, expected)
    # The killed runs' open transactions were aborted (by the next run's
    # init_transactions): their records are in the log, visible to read_uncommitted only.
    everything = read_topic(bootstrap, out, isolation="read_uncommitted")
    assert len(everything) >= len(committed)


def test_a_zombie_producer_is_fenced_and_cannot_commit(
    apache_kafka: ApacheKafka, request: pytest.FixtureRequest
) -> None:
    bootstrap = apache_kafka.bootstrap
    _, out = topics(apache_kafka, request)
    sink = KafkaSink([bootstrap], out, shards=1, transactional=True)
    first = sink.build_part("flow.out", "shard-000", None)
    first.write_batch([_batch(0, range(500))])
    state = first.snapshot()  # epoch 1 committed
    assert first.stats.transactions_committed == 1
    first.write_batch([_batch(0, range(500, 800))])  # epoch 2 open... then the process stalls

    # A new process takes over the shard from the last snapshot (same transactional id).
    second = sink.build_part("flow.out", "shard-000", state)
    second.write_batch([_batch(0, range(500, 1000))])
    second.snapshot()

    # The stalled process wakes up and tries to finish its epoch: fenced.
    with pytest.raises(
        SinkError,
        match=rf"kafka sink `{out}`: shard 0 was fenced: a newer producer took over its "
        rf"transactional id `thalweg-{out}-flow\.out-0`.*stop this process",
    ):
        first.write_batch([_batch(0, range(800, 900))])
        first.snapshot()
    first.abort()
    first.close()
    second.close()

    committed = Counter(r.locator for r in read_topic(bootstrap, out, isolation="read_committed"))
    assert max(committed.values()) == 1
    assert set(committed) == {("src", 0, o) for o in range(1000)}
    # The zombie's epoch reached the log (read_uncommitted sees it) but was never committed.
    everything = Counter(r.locator for r in read_topic(bootstrap, out))
    assert everything[("src", 0, 600)] == 2


def test_a_zombie_flow_process_resumed_after_a_new_one_took_over_is_fenced(
    apache_kafka: ApacheKafka, request: pytest.FixtureRequest, crash: CrashHarness
) -> None:
    bootstrap = apache_kafka.bootstrap
    src, out = topics(apache_kafka, request)
    expected = fill(bootstrap, src)
    # 200 records/s per partition: about 7.5 s of reading, so the freeze falls mid-run.
    fast = {"THALWEG_TRANSACTIONAL": "1", "THALWEG_MAX_RECORDS_PER_S": "200"}
    flow = kafka_sink_flow(crash, bootstrap, src, out, **fast)
    zombie = flow.start()
    try:
        # Frozen mid-run once it has committed an epoch: its producer is initialised and
        # the next epoch's transaction open (a freeze before that would leave no zombie,
        # only a late starter that finds everything written and skips it).
        deadline = time.monotonic() + 60
        while not read_topic(bootstrap, out, isolation="read_committed", timeout=10):
            assert time.monotonic() < deadline and zombie.poll() is None
            time.sleep(0.2)
        zombie.send_signal(signal.SIGSTOP)
        flow.finishes()  # the successor, on the same store
    finally:
        zombie.send_signal(signal.SIGCONT)
    _, err = zombie.communicate(timeout=120)
    # The zombie cannot commit: the broker refuses its transaction as fenced by the newer
    # instance, and it fails.
    assert zombie.returncode != 0, err[-5000:]
    assert "fenced by a newer instance (_FENCED)" in err, err[-3000:]
    # Its last words are thalweg's: what happened and what to do (stop it; the newer
    # run owns the output), not a replay advice that would start a third instance.
    last = err.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"thalweg: SinkTerminalError: kafka sink `{out}`: shard \d+ was fenced: a newer "
        rf"producer took over its transactional id `thalweg-{out}-[^`]+-\d+` \(_FENCED\).*"
        r"stop this process and keep the newer run.*",
        last,
    ), err[-3000:]
    assert_exactly_once(read_topic(bootstrap, out, isolation="read_committed"), src, expected)


def _shard_of_source(partition: int, shards: int) -> int:
    return stable_route(encode_part("src", partition), shards)


def test_a_resumed_shard_reads_back_its_records_committed_after_another_shards_open_transaction(
    apache_kafka: ApacheKafka, request: pytest.FixtureRequest
) -> None:
    # Two shards share the one output partition. A killed run left shard `other`'s
    # transaction open in it BEFORE shard `mine` committed more records: a read_committed
    # reader stops at that transaction's first offset (the last stable offset) until it
    # is aborted, here by the broker's transaction timeout.
    bootstrap = apache_kafka.bootstrap
    out = topic_name(request)
    create_topic(bootstrap, out, partitions=1)
    sink = KafkaSink([bootstrap], out, shards=2, transactional=True)
    mine = _shard_of_source(0, 2)
    other = 1 - mine
    first = sink.build_part("flow.out", shard_name(mine), None)
    first.write_batch([_batch(0, range(500))])
    resume = first.snapshot()  # epoch 1 committed: the last state Bytewax recorded

    dangling = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"thalweg-{out}-flow.out-{other}",
            "transaction.timeout.ms": 2000,
        }
    )
    dangling.init_transactions(30)
    dangling.begin_transaction()
    dangling.produce(out, b"half an epoch of the other shard", partition=0)
    assert dangling.flush(30) == 0  # in the log, never committed: the process was killed

    first.write_batch([_batch(0, range(500, 1000))])
    first.snapshot()  # epoch 2 committed, before Bytewax recorded it...
    first.write_batch([_batch(0, range(1000, 1100))])  # ...and epoch 3 open: killed here

    # The resumed shard (its start aborts its own epoch 3) replays epochs 2 and 3.
    resumed = sink.build_part("flow.out", shard_name(mine), resume)
    resumed.write_batch([_batch(0, range(500, 1100))])
    resumed.snapshot()
    resumed.close()
    first.close()

    assert resumed.stats.rows_skipped_replay == 500
    # The other shard's next run fences its transactional id (closing nothing open).
    sink.build_part("flow.out", shard_name(other), None).close()
    committed = Counter(r.locator for r in read_topic(bootstrap, out, isolation="read_committed"))
    assert set(committed) == {("src", 0, o) for o in range(1100)}
    assert max(committed.values()) == 1, sorted(k for k, n in committed.items() if n > 1)[:5]


def test_a_transaction_the_current_run_opened_does_not_hold_up_another_shards_read_back(
    apache_kafka: ApacheKafka, request: pytest.FixtureRequest
) -> None:
    # Shard `other` of this run opens its epoch's transaction before shard `mine` is
    # built (a shard without state is built when its first record arrives). `mine`'s
    # read-back must not wait for that transaction: it commits only when the epoch
    # closes, after `mine`'s write returns.
    bootstrap = apache_kafka.bootstrap
    out = topic_name(request)
    create_topic(bootstrap, out, partitions=1)
    sink = KafkaSink(
        [bootstrap], out, shards=2, transactional=True, unreachable_timeout=timedelta(seconds=5)
    )
    mine = _shard_of_source(0, 2)
    other_src = next(p for p in range(1, 50) if _shard_of_source(p, 2) != mine)
    done = sink.build_part("flow.out", shard_name(mine), None)
    done.write_batch([_batch(0, range(300))])
    resume = done.snapshot()
    done.close()

    other = sink.build_part("flow.out", shard_name(1 - mine), None)
    other.write_batch([_batch(other_src, range(200))])  # its transaction is open
    resumed = sink.build_part("flow.out", shard_name(mine), resume)
    resumed.write_batch([_batch(0, range(300, 400))])
    other.snapshot()
    resumed.snapshot()
    other.close()
    resumed.close()

    committed = Counter(r.locator for r in read_topic(bootstrap, out, isolation="read_committed"))
    assert set(committed) == {("src", 0, o) for o in range(400)} | {
        ("src", other_src, o) for o in range(200)
    }
    assert max(committed.values()) == 1


def test_a_transaction_left_open_past_the_wait_fails_the_read_back_naming_it(
    apache_kafka: ApacheKafka, request: pytest.FixtureRequest
) -> None:
    # The other shard's open transaction outlives the wait (its producer's timeout is
    # a minute, the sink's own five seconds): the resume fails loudly, naming the
    # partition, the transaction's offset and how to end it, and writes nothing.
    bootstrap = apache_kafka.bootstrap
    out = topic_name(request)
    create_topic(bootstrap, out, partitions=1)
    sink = KafkaSink(
        [bootstrap],
        out,
        shards=2,
        transactional=True,
        unreachable_timeout=timedelta(seconds=2),
        librdkafka={"transaction.timeout.ms": 5000, "message.timeout.ms": 5000},
    )
    mine = _shard_of_source(0, 2)
    first = sink.build_part("flow.out", shard_name(mine), None)
    first.write_batch([_batch(0, range(100))])
    resume = first.snapshot()
    dangling = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"other-{out}", "log_level": 0}
    )
    dangling.init_transactions(30)
    dangling.begin_transaction()
    dangling.produce(out, b"an open transaction", partition=0)
    assert dangling.flush(30) == 0
    first.write_batch([_batch(0, range(100, 200))])
    first.snapshot()
    first.close()

    resumed = sink.build_part("flow.out", shard_name(mine), resume)
    with pytest.raises(
        SinkTransientError,
        match=rf"reading back `{out}:0` to reconcile: a transaction open at offset 101 .*"
        r"hides this shard's committed records up to offset 201 .*start the flow again",
    ):
        resumed.write_batch([_batch(0, range(100, 200))])
    resumed.abort()
    resumed.close()
    assert resumed.stats.records_produced == 0
    dangling.abort_transaction(30)
