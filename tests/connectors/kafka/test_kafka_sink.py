"""KafkaSink: every input record once in the output topic, replays reconciled from its tail.

Real components only: librdkafka's mock cluster (or ``THALWEG_TEST_KAFKA``), the real
epoch-sink base, real producers and consumers.
"""

from __future__ import annotations

import pickle
from datetime import timedelta
from typing import Any, cast

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import run_main
from confluent_kafka import KafkaError, KafkaException, Producer

from tests.connectors.kafka.kafka_sink_helpers import read_topic
from thalweg_bytewax.codecs import BytesEncoder
from thalweg_bytewax.connectors.kafka import KafkaSink, KafkaSource
from thalweg_bytewax.connectors.kafka._sink_partition import out_state_key
from thalweg_bytewax.errors import ConfigError, SinkTerminalError, SinkTransientError
from thalweg_bytewax.records.ids import record_ids_array
from thalweg_bytewax.testing import produce


def raw(topic: str, partition: int, offsets: list[int], *, tag: str = "v") -> pa.RecordBatch:
    """A raw-lane-shaped batch of one source partition."""
    values = pa.array([f"{tag}-{partition}-{o}".encode() for o in offsets], pa.binary())
    n = len(offsets)
    topics = pa.array([topic] * n, pa.string())
    parts = pa.array([partition] * n, pa.int32())
    offs = pa.array(offsets, pa.int64())
    return pa.RecordBatch.from_pydict(
        {
            "_twg_source_topic": topics,
            "_twg_source_partition": parts,
            "_twg_source_offset": offs,
            "_twg_source_key": pa.array([f"k{o}".encode() for o in offsets], pa.binary()),
            "_twg_source_value": values,
            "_twg_record_id": record_ids_array(None, topic, partition, offs, values),
        }
    )


def locators(bootstrap: str, topic: str) -> list[tuple[str, int, int]]:
    return [r.locator for r in read_topic(bootstrap, topic)]


def test_a_mirror_flow_lands_every_record_once_with_key_value_and_headers(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    src, out = make_topic(), make_topic()
    produce(
        kafka_bootstrap,
        src,
        [
            {
                "key": f"k{i}".encode(),
                "value": f"v{p}-{i}".encode(),
                "partition": p,
                "headers": [("h", b"x"), ("h", None)],
            }
            for i in range(200)
            for p in range(4)
        ],
    )
    flow = Dataflow("mirror")
    stream = op.input("in", flow, KafkaSource([kafka_bootstrap], [src], tail=False))
    op.output("out", stream, KafkaSink([kafka_bootstrap], out, shards=2))
    run_main(flow)
    got = read_topic(kafka_bootstrap, out)
    assert len(got) == 800
    assert len({r.locator for r in got}) == 800
    for r in got:
        topic, p, i = r.locator
        assert topic == src
        assert r.value == f"v{p}-{i}".encode() and r.key == f"k{i}".encode()
        assert r.record_id is not None and len(r.record_id) == 16
        # the locator headers first, then the source's headers, duplicates and nulls kept
        assert [k for k, _ in r.headers][-2:] == ["h", "h"] and r.headers[-1][1] is None


def test_a_replay_after_a_flushed_but_unrecorded_epoch_is_skipped(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    out = make_topic()
    sink = KafkaSink([kafka_bootstrap], out, shards=1)
    part = sink.build_part("flow.out", "shard-000", None)
    part.write_batch([raw("src", 0, list(range(10)))])
    first = part.snapshot()
    assert first["src:0"] == 10 and out_state_key(out, 0) in first
    part.write_batch([raw("src", 0, list(range(10, 20)))])
    part.snapshot()  # flushed, but the crash loses this epoch's state
    part.close()
    again = sink.build_part("flow.out", "shard-000", pickle.loads(pickle.dumps(first)))
    again.write_batch([raw("src", 0, list(range(10, 25)))])  # the source replays from 10
    assert again.stats.rows_skipped_replay == 10
    assert again.snapshot()["src:0"] == 25
    again.close()
    assert sorted(o for _, _, o in locators(kafka_bootstrap, out)) == list(range(25))


def test_a_transactional_replay_is_skipped_beside_another_shards_open_transaction(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    # The other shard leaves its epoch's transaction open in the partitions this shard
    # writes to; this shard, resumed, finds what it committed and neither writes it
    # twice nor waits (the mock cluster has no last stable offset below the end).
    out = make_topic()
    sink = KafkaSink(
        [kafka_bootstrap],
        out,
        shards=2,
        transactional=True,
        unreachable_timeout=timedelta(seconds=2),
    )
    mine = sink.part_fn("src:0")
    other_src = next(p for p in range(1, 50) if sink.part_fn(f"src:{p}") != mine)
    part = sink.build_part("flow.out", f"shard-{mine:03d}", None)
    part.write_batch([raw("src", 0, list(range(10)))])
    first = part.snapshot()
    other = sink.build_part("flow.out", f"shard-{1 - mine:03d}", None)
    other.write_batch([raw("src", other_src, list(range(5)))])  # its transaction stays open
    part.write_batch([raw("src", 0, list(range(10, 20)))])
    part.snapshot()  # committed, but the crash loses this epoch's state
    part.close()
    again = sink.build_part("flow.out", f"shard-{mine:03d}", pickle.loads(pickle.dumps(first)))
    again.write_batch([raw("src", 0, list(range(10, 25)))])
    assert again.stats.rows_skipped_replay == 10
    again.snapshot()
    again.close()
    other.close()
    assert sorted(o for _, p, o in locators(kafka_bootstrap, out) if p == 0) == list(range(25))


def test_a_replay_before_any_snapshot_reads_the_whole_topic_back(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    out = make_topic()
    sink = KafkaSink([kafka_bootstrap], out, shards=1)
    part = sink.build_part("flow.out", "shard-000", None)
    part.write_batch([raw("src", 0, list(range(6))), raw("src", 3, list(range(4)))])
    part.snapshot()  # durable, but the process dies before the recovery store commits
    part.close()
    again = sink.build_part("flow.out", "shard-000", None)
    again.write_batch([raw("src", 0, list(range(8))), raw("src", 3, list(range(4)))])
    again.snapshot()
    again.close()
    assert again.stats.rows_skipped_replay == 10 and again.stats.records_read_back == 10
    assert sorted(locators(kafka_bootstrap, out)) == sorted(
        [("src", 0, o) for o in range(8)] + [("src", 3, o) for o in range(4)]
    )


def test_a_replay_that_differs_by_record_id_is_refused(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    out = make_topic()
    sink = KafkaSink([kafka_bootstrap], out, shards=1)
    part = sink.build_part("flow.out", "shard-000", None)
    part.write_batch([raw("src", 0, list(range(5)))])
    part.snapshot()
    part.close()
    again = sink.build_part("flow.out", "shard-000", None)
    with pytest.raises(SinkTerminalError, match=r"topic `.*` holds a different record at offset 0"):
        again.write_batch([raw("src", 0, list(range(5)), tag="recreated")])
    again.close()


def test_partitioner_source_keeps_the_source_partition(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    out = make_topic()
    sink = KafkaSink([kafka_bootstrap], out, shards=1, partitioner="source")
    part = sink.build_part("flow.out", "shard-000", None)
    part.write_batch([raw("src", p, list(range(5))) for p in range(4)])
    part.snapshot()
    part.close()
    got = read_topic(kafka_bootstrap, out)
    assert len(got) == 20 and all(r.partition == r.locator[1] for r in got)
    bad = sink.build_part("flow.out", "shard-000", None)
    with pytest.raises(SinkTerminalError, match=r"partition 9; expected one of the topic's 4"):
        bad.write_batch([raw("src", 9, [0])])
    bad.close()


def test_an_encoder_a_key_column_and_header_columns(kafka_bootstrap: str, make_topic: Any) -> None:
    out = make_topic()
    batch = raw("src", 1, [0, 1, 2]).append_column("payload", pa.array(["a", "b", None]))
    batch = batch.append_column("id", pa.array([7, 8, 9], pa.int64()))
    batch = batch.append_column("tenant", pa.array(["x", "y", "z"]))
    sink = KafkaSink(
        [kafka_bootstrap],
        out,
        shards=1,
        encoder=BytesEncoder("payload"),
        key="id",
        headers={"tenant": "tenant"},
    )
    part = sink.build_part("flow.out", "shard-000", None)
    part.write_batch([batch])
    part.snapshot()
    part.close()
    got = sorted(read_topic(kafka_bootstrap, out), key=lambda r: r.locator)
    assert [(r.key, r.value, r.header("tenant")) for r in got] == [
        (b"7", b"a", b"x"),
        (b"8", b"b", b"y"),
        (b"9", None, b"z"),  # a null value is a tombstone
    ]


def test_unreachable_brokers_fail_loudly_after_the_timeout() -> None:
    sink = KafkaSink(
        ["127.0.0.1:1"],
        "nowhere",
        metadata_timeout=timedelta(seconds=0.5),
        unreachable_timeout=timedelta(seconds=1),
    )
    with pytest.raises(
        SinkTransientError,
        match=r"kafka sink `nowhere`: could not reach the brokers within 1 s \(_TRANSPORT\); "
        r"check `brokers` .* or raise `unreachable_timeout`",
    ):
        sink.build_part("flow.out", "shard-000", None)


def test_trace_context_goes_into_the_headers_when_a_span_is_active(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    out = make_topic()
    tracer = TracerProvider().get_tracer("test")
    sink = KafkaSink([kafka_bootstrap], out, shards=1)
    part = sink.build_part("flow.out", "shard-000", None)
    part.write_batch([raw("src", 0, [0])])
    with tracer.start_as_current_span("produce") as span:
        part.write_batch([raw("src", 0, [1])])
        trace_id = format(span.get_span_context().trace_id, "032x")
    part.snapshot()
    part.close()
    got = {r.locator[2]: r for r in read_topic(kafka_bootstrap, out)}
    assert got[0].header("traceparent") is None
    parent = got[1].header("traceparent")
    assert parent is not None and trace_id in parent.decode()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"topic": "a:b"}, r"kafka sink: `topic`: expected a non-empty topic name without"),
        ({"partitioner": "round_robin"}, r"`partitioner` expected 'key' or 'source'"),
        ({"shards": 0}, r"kafka sink: `shards` expected an integer >= 1; got 0"),
        ({"encoder": object()}, r"`encoder` expected an encoder"),
        ({"headers": {"_twg.source.offset": "x"}}, r"which the sink writes itself"),
        ({"delivery_timeout": 5}, r"`delivery_timeout` expected a positive datetime.timedelta"),
        (
            {"unreachable_timeout": None},
            r"`unreachable_timeout` expected a positive datetime.timedelta",
        ),
        ({"librdkafka": {1: "secret"}}, r"`librdkafka` expected a mapping"),
    ],
)
def test_bad_arguments_are_config_errors(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"brokers": ["b:9092"], "topic": "t", **kwargs}
    with pytest.raises(ConfigError, match=match):
        KafkaSink(**args)


def test_the_repr_never_shows_librdkafka() -> None:
    sink = KafkaSink(["b:9092"], "t", librdkafka={"sasl.password": "hunter2"})
    assert "hunter2" not in repr(sink)


def test_librdkafka_is_the_one_name_the_old_add_config_warns_and_lands_on_it() -> None:
    # The source and the sink spell their pass-through settings alike.
    with pytest.warns(DeprecationWarning, match="`add_config` is deprecated; pass `librdkafka`"):
        old = KafkaSink(["b:9092"], "t", add_config={"compression.type": "zstd"})
    assert old.config.librdkafka == {"compression.type": "zstd"}
    assert old.producer_config("flow.out", 0)["compression.type"] == "zstd"
    with pytest.warns(DeprecationWarning), pytest.raises(ConfigError, match="keep one"):
        KafkaSink(["b:9092"], "t", librdkafka={}, add_config={})


def test_a_coverage_store_gets_each_committed_epoch_under_the_step_id(
    kafka_bootstrap: str, make_topic: Any, tmp_path: Any
) -> None:
    from thalweg_bytewax.coverage.store import SqliteCoverageStore

    store = SqliteCoverageStore(tmp_path)
    sink = KafkaSink([kafka_bootstrap], make_topic(), shards=1, coverage_store=store)
    part = sink.build_part("flow.out", "shard-000", None)
    part.write_batch([raw("src", 0, list(range(10))), raw("src", 1, [4, 5])])
    part.snapshot()
    part.close()
    got = {(e.sink, e.topic, e.partition): e.coverage.to_list() for e in store.entries()}
    assert got == {("flow.out", "src", 0): [[0, 9]], ("flow.out", "src", 1): [[4, 5]]}


class _FencedOnPoll:
    """The partition's real producer, as a zombie's is once a newer run took over: every
    produce refused with `_FATAL`, and the fencing itself raised by the next poll (as
    librdkafka raised it in a zombie flow process on Apache Kafka)."""

    def __init__(self, producer: Any) -> None:
        self._producer = producer

    def produce(self, *args: Any, **kwargs: Any) -> None:
        raise KafkaException(KafkaError(KafkaError._FATAL, "fatal error", fatal=True))  # noqa: SLF001

    def poll(self, timeout: float = 0) -> int:
        raise KafkaException(
            KafkaError(
                KafkaError._FENCED,  # noqa: SLF001 - librdkafka's local error code
                "Failed to add partitions to transaction: Local: This instance has been "
                "fenced by a newer instance",
                fatal=True,
            )
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._producer, name)


def test_a_fencing_raised_by_the_poll_after_a_refused_produce_ends_as_the_zombies_error(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    out = make_topic()
    sink = KafkaSink([kafka_bootstrap], out, shards=1, transactional=True)
    part = sink.build_part("flow.out", "shard-000", None)
    part.write_batch([raw("src", 0, list(range(10)))])
    part.snapshot()
    real = part._producer  # noqa: SLF001
    part._producer = cast("Producer", _FencedOnPoll(real))  # noqa: SLF001
    try:
        with pytest.raises(
            SinkTerminalError,
            match=rf"kafka sink `{out}`: shard 0 was fenced: a newer producer took over its "
            rf"transactional id `thalweg-{out}-flow\.out-0` \(_FENCED\).*stop this process",
        ):
            part.write_batch([raw("src", 0, list(range(10, 20)))])
    finally:
        part._producer = real  # noqa: SLF001
        part.abort()
        part.close()
