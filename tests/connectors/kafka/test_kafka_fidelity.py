"""KafkaSource -> ParquetSink keeps every field of every record (the fidelity corpus)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import bytewax.operators as op
import duckdb
from bytewax.dataflow import Dataflow
from bytewax.testing import run_main
from confluent_kafka import Consumer, TopicPartition

from tests.fixtures.kafka import create_topic, real_broker
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.records.batches import iter_headers
from thalweg_bytewax.testing import produce

NON_UTF8 = b"\xff\xfe\x80\x00caf\xc3"
MIB = 1024 * 1024


TOPIC_CONFIG = {
    "message.timestamp.after.max.ms": str(2**63 - 1),  # Kafka 4 refuses > 1 h ahead
    "max.message.bytes": str(2 * MIB),  # the 1 MiB value plus its batch overhead
}
"""What a real broker's topic needs to accept the corpus (the mock accepts it as is)."""


def corpus() -> list[dict[str, Any]]:
    """Edge values abstractions usually swallow; partition chosen explicitly."""
    recs: list[dict[str, Any]] = [
        {"key": None, "value": b"null key"},
        {"key": b"", "value": b"empty key"},
        {"key": b"k", "value": None},  # tombstone
        {"key": b"k", "value": b""},  # empty value
        {"key": b"no-headers", "value": b"v", "headers": []},
        {"key": b"one-header", "value": b"v", "headers": [("h", b"1")]},
        {
            "key": b"200-headers",
            "value": b"v",
            "headers": [(f"h{i:03d}", bytes([i % 256])) for i in range(200)],
        },
        {
            "key": b"dup",
            "value": b"v",
            "headers": [("a", b"1"), ("a", b"2"), ("b", b"x"), ("a", b"3")],
        },
        {"key": b"null-hdr", "value": b"v", "headers": [("n", None), ("n", b""), ("n", None)]},
        {"key": b"ts-small", "value": b"v", "timestamp": 1},
        {"key": b"ts-large", "value": b"v", "timestamp": 32503680000000},  # year 3000
        {"key": b"ts-now", "value": b"v", "timestamp": 0},  # librdkafka: 0 means now
        {"key": "clé ü 日本".encode(), "value": "valeur — ü 日本 🚀".encode()},
        {
            "key": NON_UTF8,
            "value": NON_UTF8 * 3,
            "headers": [("名前-ü", NON_UTF8), ("", b"empty name")],
        },
        {"key": b"big", "value": bytes(range(256)) * (MIB // 256)},
    ]
    for i, rec in enumerate(recs):
        rec["partition"] = i % 2  # two partitions carry data, two stay empty
    return recs


def oracle(bootstrap: str, topic: str, partitions: int = 4) -> dict[tuple[int, int], Any]:
    """Read the topic with a plain consumer: the broker-authoritative truth."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "oracle", "enable.auto.commit": False}
    )
    out: dict[tuple[int, int], Any] = {}
    try:
        ends = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 30
        total = sum(ends.values())
        while len(out) < total and time.monotonic() < deadline:
            # At most what is left: `consume` returns once it holds that many, not at its
            # timeout (it waits out the timeout while it holds fewer than it asked for).
            for m in c.consume(min(1000, total - len(out)), timeout=0.5):
                assert m.error() is None, m.error()
                partition, offset = m.partition(), m.offset()
                assert partition is not None and offset is not None, m
                out[(partition, offset)] = m
    finally:
        c.close()
    return out


def run_raw_lane(bootstrap: str, topic: str, lane: Path, **source_kw: Any) -> None:
    flow = Dataflow("fidelity")
    raw = op.input("in", flow, KafkaSource([bootstrap], [topic], tail=False, **source_kw))
    op.output("lane", raw, ParquetSink(lane))
    run_main(flow)


def test_every_field_of_every_record_survives(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = (f"fidelity-{uuid.uuid4().hex[:8]}-" + "x" * 249)[:249]  # the Kafka maximum
    assert len(topic) == 249
    if real_broker():
        create_topic(kafka_bootstrap, topic, config=TOPIC_CONFIG)
    produced = corpus()
    # Idempotent: a retried request (the 1 MiB record on a busy broker) keeps its place,
    # so each partition holds the records in produce order, as the pairing below needs.
    sent_from_ms = int(time.time() * 1000)
    produce(kafka_bootstrap, topic, produced, config={"enable.idempotence": True})
    sent_until_ms = int(time.time() * 1000) + 1
    truth = oracle(kafka_bootstrap, topic)
    assert len(truth) == len(produced)

    lane = tmp_path / "lane"
    run_raw_lane(kafka_bootstrap, topic, lane)
    table = read_lane(lane).sort_by(
        [("_twg_source_partition", "ascending"), ("_twg_source_offset", "ascending")]
    )
    assert table.num_rows == len(produced)

    rows = table.to_pylist()
    headers = list(iter_headers(table.combine_chunks().to_batches()[0]))
    # Records of one partition keep produce order, so pair them up per partition.
    expected_by_part = {p: [r for r in produced if r["partition"] == p] for p in (0, 1)}
    seen_by_part: dict[int, int] = {0: 0, 1: 0}
    for row, hdrs in zip(rows, headers, strict=True):
        p, o = row["_twg_source_partition"], row["_twg_source_offset"]
        sent = expected_by_part[p][seen_by_part[p]]
        seen_by_part[p] += 1
        msg = truth[(p, o)]
        # Produced fields: byte-identical, null vs empty distinct.
        assert row["_twg_source_key"] == sent["key"]
        assert row["_twg_source_value"] == sent["value"]
        assert hdrs == tuple(sent.get("headers") or ())
        # Broker-authoritative fields equal what a plain consumer sees.
        assert row["_twg_source_topic"] == topic == msg.topic()
        assert o == msg.offset()
        assert row["_twg_source_leader_epoch"] == msg.leader_epoch()
        ts_type, ts = msg.timestamp()
        assert row["_twg_source_timestamp_type"] == {1: "CreateTime", 2: "LogAppendTime"}[ts_type]
        assert int(row["_twg_source_timestamp"].timestamp() * 1000) == ts
        if sent.get("timestamp"):
            assert ts == sent["timestamp"]
        assert row["_twg_source_cluster"]
        assert len(row["_twg_record_id"]) == 16
        assert row["_twg_ingest_ts"] <= row["_twg_emit_ts"]
    assert seen_by_part == {0: len(expected_by_part[0]), 1: len(expected_by_part[1])}
    # The "0 = now" timestamp became the time it was produced at, not 0 or the read's.
    now_row = next(r for r in rows if r["_twg_source_key"] == b"ts-now")
    now_ms = int(now_row["_twg_source_timestamp"].timestamp() * 1000)
    assert sent_from_ms <= now_ms <= sent_until_ms, (sent_from_ms, now_ms, sent_until_ms)

    # DuckDB reads the same lane through a glob, and sees no staging files.
    con = duckdb.connect()
    n = con.execute(f"select count(*) from read_parquet('{lane}/**/*.parquet')").fetchone()
    assert n == (len(produced),)
    visible = [p for p in lane.rglob("*") if p.is_file() and not p.name.startswith(".")]
    assert all(p.suffix == ".parquet" for p in visible)
    assert not list(lane.rglob(".staging-*"))


def test_empty_topic_partitions_end_cleanly(
    kafka_bootstrap: str, make_topic: Any, tmp_path: Path
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"only", "partition": 2}])
    lane = tmp_path / "lane"
    run_raw_lane(kafka_bootstrap, topic, lane)
    table = read_lane(lane)
    assert table.column("_twg_source_value").to_pylist() == [b"only"]
    assert table.column("_twg_source_partition").to_pylist() == [2]


def test_batches_respect_the_byte_budget(
    kafka_bootstrap: str, make_topic: Any, tmp_path: Path
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": bytes(200_000), "partition": 0} for _ in range(20)])
    sizes: list[int] = []
    flow = Dataflow("budget")
    raw = op.input(
        "in", flow, KafkaSource([kafka_bootstrap], [topic], tail=False, max_batch_bytes=1_000_000)
    )
    op.inspect("sizes", raw, lambda _s, kv: sizes.append(kv[1].nbytes))
    op.output("lane", raw, ParquetSink(tmp_path / "lane"))
    run_main(flow)
    assert read_lane(tmp_path / "lane").num_rows == 20
    # The first poll has no size estimate yet; every later batch stays near the budget.
    assert max(sizes[1:], default=0) <= 1_500_000
