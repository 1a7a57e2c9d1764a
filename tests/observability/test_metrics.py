"""/metrics scraped during a real run (mock broker -> Parquet raw lane) shows counters moving."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.testing import run_main

from tests.observability.conftest import get, get_json
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.observability import instruments, observe, running_server
from thalweg_bytewax.testing import produce


def series(text: str, name: str, topic: str) -> float:
    """The sum of a metric's samples for one topic (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and f'topic="{topic}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_move_while_the_flow_runs(kafka_bootstrap, make_topic, tmp_path: Path) -> None:
    topic = make_topic()
    n = 1200
    produce(kafka_bootstrap, topic, [{"value": b"x" * 50, "partition": i % 2} for i in range(n)])
    observe(port=0)
    server = running_server()
    assert server is not None
    url = server.url + "/metrics"

    flow = Dataflow("scraped")
    # 600 records/s per partition: the run lasts about a second, scraped every 50 ms.
    source = KafkaSource(kafka_bootstrap, topic, tail=False, max_records_per_s=600, batch_size=50)
    raw = op.input("in", flow, source)
    op.output("lane", raw, ParquetSink(tmp_path / "lane"))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            run_main(flow, epoch_interval=None)
        except BaseException as exc:
            errors.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    seen: list[float] = []
    while runner.is_alive():
        code, body = get(url)
        assert code == 200
        seen.append(series(body.decode(), instruments.SOURCE_RECORDS.name, topic))
        time.sleep(0.05)
    runner.join()
    assert not errors
    moving = sorted({v for v in seen if 0 < v < n})
    assert len(moving) >= 2, f"no counter movement seen during the run: {seen}"
    assert seen == sorted(seen)  # a counter never goes back

    text = get(url)[1].decode()
    assert series(text, instruments.SOURCE_RECORDS.name, topic) == n
    assert series(text, instruments.CONSUMER_LAG.name, topic) == 0
    assert series(text, instruments.SOURCE_BATCHES.name, topic) >= n / 50
    # Commit durations are bucketed in seconds, from half a millisecond.
    assert re.search(
        rf'{instruments.SINK_COMMIT_DURATION.name}_bucket{{le="0.0005",.*step_id="scraped.lane"',
        text,
    )
    assert f"{instruments.SINK_ROWS_WRITTEN.name}{{" in text
    assert re.search(rf'{instruments.COVERAGE_LAG.name}{{.*topic="{topic}".*}} 0\.0', text)


def test_step_counts_from_several_worker_threads_add_up(tmp_path: Path) -> None:
    # Bytewax workers of one process are threads running the same step ids: the step
    # counters (plain integers per thread, summed at collection) lose no update.
    import pyarrow as pa

    from thalweg_bytewax.lanes.dlq import DLQ_REASON
    from thalweg_bytewax.observability.gate import observe_step

    observe(port=0)
    server = running_server()
    assert server is not None
    step = f"threads-{tmp_path.name}"
    batch = pa.record_batch({"x": list(range(10))})
    rejected = pa.record_batch({DLQ_REASON: ["decode", "decode", "contract"]})
    per_thread, threads = 400, 4

    def work() -> None:
        for _ in range(per_thread):
            obs = observe_step("decode", step, batch)
            assert obs is not None
            obs.finish(batch.slice(0, 7), rejected)

    runners = [threading.Thread(target=work) for _ in range(threads)]
    for t in runners:
        t.start()
    for t in runners:
        t.join()
    text = get(server.url + "/metrics")[1].decode()
    batches = per_thread * threads

    def value(name: str, **labels: str) -> float:
        want = [f'{k}="{v}"' for k, v in {"step_id": step, **labels}.items()]
        for line in text.splitlines():
            if line.startswith(name + "{") and all(w in line for w in want):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"{name} {labels} not in /metrics")

    assert value(instruments.STEP_RECORDS_IN.name) == 10 * batches
    assert value(instruments.STEP_RECORDS_OUT.name) == 7 * batches
    assert value(instruments.REJECTED_RECORDS.name, reason="decode") == 2 * batches
    assert value(instruments.REJECTED_RECORDS.name, reason="contract") == batches
    assert value(instruments.BATCH_RECORDS.name + "_count") == batches
    stage = get_json(server.url + "/stats")[1]["stages"][step]
    assert (stage["records"], stage["batches"]) == (10 * batches, batches)


def test_a_cluster_worker_keeps_one_count_per_step_however_many_batches(
    entry_point_name: str,
) -> None:
    # A cluster's worker gets a fresh Python thread state, so an empty threading.local,
    # at every batch: counts kept per thread must still be one per step and worker, not
    # one more per batch (a leak of a few hundred bytes a batch, for as long as it runs).
    import gc

    import pyarrow as pa

    import thalweg_bytewax.operators as twg
    from tests.fixtures.flows import ENTRY_POINTS
    from tests.helpers import raw_values, run_flow
    from thalweg_bytewax.codecs import JsonCodec
    from thalweg_bytewax.observability._collect import StepCounts

    observe(port=0)
    server = running_server()
    assert server is not None
    batches, rows = 120, 5
    items = [
        (
            f"orders:{b % 4}",
            raw_values(
                [b'{"id": %d}' % (b * rows + i) for i in range(rows)],
                partition=b % 4,
                first=b * rows,
            ),
        )
        for b in range(batches)
    ]
    codec = JsonCodec(pa.schema([("id", pa.int64())]))
    step = f"cluster-counts-{entry_point_name}"
    before = sum(isinstance(o, StepCounts) for o in gc.get_objects())
    run_flow(
        items,
        lambda up: twg.decode("decode", up, codec).ok,
        flow_id=step,
        entry_point=ENTRY_POINTS[entry_point_name],
    )
    kept = sum(isinstance(o, StepCounts) for o in gc.get_objects()) - before
    assert 1 <= kept <= 2  # one per worker (two workers at most here)
    text = get(server.url + "/metrics")[1].decode()
    want = f'step_id="{step}.decode"'
    lines = [
        line
        for line in text.splitlines()
        if line.startswith(instruments.STEP_RECORDS_IN.name + "{") and want in line
    ]
    assert [float(line.rsplit(" ", 1)[1]) for line in lines] == [batches * rows]
    stage = get_json(server.url + "/stats")[1]["stages"][f"{step}.decode"]
    assert stage["batches"] == batches
