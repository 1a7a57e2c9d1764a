"""/health, /ready, /live, /stats over real HTTP, driven by real partitions and operators.

/ready flips when a Kafka source partition or the raw Parquet lane fails, and not when a
step sends most of a batch to the DLQ (that shows in /health as degraded).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from bytewax.testing import run_main

import thalweg_bytewax.operators as twg
from tests.helpers import raw_batch, raw_values, run_flow
from tests.observability.conftest import get, get_json
from thalweg_bytewax.codecs import AvroCodec
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.dev.samples import ORDER_AVRO_SCHEMA, encode_order_avro, sample_orders
from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.observability import observe, registry, running_server
from thalweg_bytewax.observability.gate import is_on
from thalweg_bytewax.testing import produce


def serve() -> str:
    observe(port=0)
    server = running_server()
    assert server is not None
    return server.url


def test_off_by_default_no_server_no_hooks(tmp_path: Path) -> None:
    assert not is_on()
    assert running_server() is None
    part = ParquetSink(tmp_path).build_part("lane", "0", None)
    assert part._obs is None
    part.close()


def test_endpoints_answer_on_a_bound_port() -> None:
    url = serve()
    assert get(url + "/live") == (200, b'{\n "live": true,\n "reason": ""\n}')
    code, body = get_json(url + "/ready")
    assert (code, body) == (200, {"ready": True, "reasons": []})
    code, tree = get_json(url + "/health")
    assert code == 200 and tree["status"] == "ok"
    code, stats = get_json(url + "/stats")
    assert code == 200 and stats["window_seconds"] == 30
    code, body = get_json(url + "/nope")
    assert code == 404 and "/metrics" in body["endpoints"]
    registry.kill("worker state lost")
    assert get_json(url + "/live") == (503, {"live": False, "reason": "worker state lost"})


def test_ready_flips_on_a_source_failure(kafka_bootstrap, make_topic) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"v", "partition": 0} for _ in range(5)])
    url = serve()
    source = KafkaSource(kafka_bootstrap, topic, tail=True)
    part = source.build_part("in", f"{topic}:0", None)
    got = 0
    deadline = time.monotonic() + 30
    # Polls do not wait (timeout 0): poll until the records arrived, bounded in time.
    while got < 5 and time.monotonic() < deadline:
        got += sum(b.num_rows for _, b in part.next_batch())
    assert got == 5
    code, tree = get_json(url + "/health")
    assert code == 200
    assert tree["components"]["source"][f"{topic}:0"]["status"] == "ok"
    assert tree["components"]["source"][f"{topic}:0"]["numbers"]["records"] == 5
    assert get(url + "/ready")[0] == 200
    # The partition's client is gone: the next poll fails, and the partition is down.
    part.close()
    # A SourceError naming the partition on the native consume, confluent-kafka's
    # RuntimeError on the pure path.
    with pytest.raises((SourceError, RuntimeError)):
        part.next_batch()
    code, body = get_json(url + "/ready")
    assert code == 503
    assert body["reasons"] and f"`{topic}:0`" in body["reasons"][0]
    code, tree = get_json(url + "/health")
    assert code == 503 and tree["status"] == "down"


def test_ready_flips_on_a_raw_lane_failure(tmp_path: Path) -> None:
    url = serve()
    lane = tmp_path / "lane"
    part = ParquetSink(lane, shards=1).build_part("lane", "0", None)
    part.write_batch([raw_batch("orders", 0, range(10))])
    part.snapshot()
    assert get(url + "/ready")[0] == 200
    code, tree = get_json(url + "/health")
    (name, sink), *_ = tree["components"]["sink"].items()
    assert sink["critical"] is True and sink["numbers"]["epochs_committed"] == 1
    # The lane's directory is replaced by a file: the next epoch cannot land.
    shutil.rmtree(lane)
    lane.write_bytes(b"not a directory")
    with pytest.raises(Exception):  # noqa: B017 - whatever the filesystem raises
        part.write_batch([raw_batch("orders", 0, range(10, 20))])
        part.snapshot()
    code, body = get_json(url + "/ready")
    assert code == 503 and "parquet sink" in body["reasons"][0]
    part.close()


def test_a_dlq_spike_degrades_the_step_but_not_readiness(tmp_path: Path) -> None:
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "1.avsc").write_text(json.dumps(ORDER_AVRO_SCHEMA))
    url = serve()
    good = [encode_order_avro(o) for o in sample_orders(3)]
    batch = raw_values([*good, *[b"\x00garbage" for _ in range(27)]])
    got = run_flow(
        [("orders:0", batch)],
        lambda up: twg.decode("decode", up, AvroCodec(schemas)),
        flow_id="dlq_spike",
        entry_point=run_main,
    )
    assert sum(b.num_rows for _, b in got["rejected"]) == 27
    assert get(url + "/ready")[0] == 200
    code, tree = get_json(url + "/health")
    assert code == 200 and tree["status"] == "degraded"
    step = tree["components"]["step"]["dlq_spike.decode"]
    assert step["status"] == "degraded"
    assert step["reason"] == "rejected 27 of 30 records of the last batch"
    stages = get_json(url + "/stats")[1]["stages"]
    assert stages["dlq_spike.decode"]["records"] == 30


def test_stats_window_forgets_after_30_seconds() -> None:
    from thalweg_bytewax.observability.window import ThroughputWindow

    w = ThroughputWindow()
    w.add("decode", 100, 1000, now=1000.0)
    w.add("decode", 50, 500, now=1010.0)
    assert w.digest(now=1010.0)["decode"]["records"] == 150
    assert w.digest(now=1035.0)["decode"] == {
        "records": 50,
        "batches": 1,
        "bytes": 500,
        "records_per_s": round(50 / 30, 3),
        "avg_batch_bytes": 500.0,
        "avg_record_bytes": 10.0,
    }
    assert w.digest(now=1041.0) == {}
