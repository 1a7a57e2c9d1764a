"""Raw-lane throughput: KafkaSource -> ParquetSink against a bare consume() loop.

Produces N sample orders (Confluent-framed Avro, ~130-byte values) to a local broker,
then times, each in its own process so peak RSS is per variant:

* ``bare``      — one tuned ``Consumer`` assigned every partition, ``consume()`` in a
                  loop, touching every value (the ceiling for any Python consumer);
* ``per-part``  — one tuned ``Consumer`` per partition, polled round-robin (the
                  consumer layout KafkaSource and Bytewax's stock source use);
* ``raw-lane``  — the real flow, ``KafkaSource(tail=False) -> ParquetSink`` under
                  ``bytewax.testing.run_main`` (one worker), durable files included,
                  with the native batch consume when it is built;
* ``raw-lane-pure`` — the same flow through confluent-kafka's ``Message`` objects
                  (``THALWEG_KAFKA_CONSUME=pure``);
* ``raw-lane-half`` — the same flow over the same partitions from their middle offset
                  (half the records), to show that peak RSS does not grow with the
                  number of records.

Usage::

    python benchmarks/raw_lane.py --records 240000
    python benchmarks/raw_lane.py --records 240000 --variants bare,raw-lane,raw-lane-pure

It starts librdkafka's mock cluster unless ``--bootstrap`` names a broker. The mock
keeps ~5 MB per partition, so records are spread over several 4-partition topics.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from _harness import broker, check_retention, peak_rss_mb, run_child  # noqa: E402

RECORDS_PER_TOPIC = 60_000  # 15k per partition: ~3 MB, under the mock's retention


def _consumer(bootstrap: str):  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer

    from thalweg_bytewax.connectors.kafka._config import consumer_config

    return Consumer(consumer_config([bootstrap], None))


def _partitions(topics: list[str]) -> list[tuple[str, int]]:
    return [(t, p) for t in topics for p in range(4)]


def variant_bare(
    bootstrap: str, topics: list[str], expected: int, start: int = 0
) -> dict[str, float]:
    from confluent_kafka import TopicPartition

    c = _consumer(bootstrap)
    c.assign([TopicPartition(t, p, 0) for t, p in _partitions(topics)])
    n = nbytes = 0
    t0 = time.perf_counter()
    while n < expected:
        for m in c.consume(10_000, timeout=0.1):
            if m.error() is None:
                n += 1
                nbytes += len(m.value())
    elapsed = time.perf_counter() - t0
    c.close()
    return {"records": n, "bytes": nbytes, "seconds": elapsed}


def variant_per_part(
    bootstrap: str, topics: list[str], expected: int, start: int = 0
) -> dict[str, float]:
    from confluent_kafka import TopicPartition

    consumers = []
    for t, p in _partitions(topics):
        c = _consumer(bootstrap)
        c.assign([TopicPartition(t, p, 0)])
        consumers.append(c)
    n = nbytes = 0
    t0 = time.perf_counter()
    while n < expected:
        got = 0
        for c in consumers:
            for m in c.consume(10_000, timeout=0):
                if m.error() is None:
                    got += 1
                    nbytes += len(m.value())
        n += got
        if not got:
            time.sleep(0.001)
    elapsed = time.perf_counter() - t0
    for c in consumers:
        c.close()
    return {"records": n, "bytes": nbytes, "seconds": elapsed}


def variant_raw_lane_pure(
    bootstrap: str, topics: list[str], expected: int, start: int = 0
) -> dict[str, float]:
    os.environ["THALWEG_KAFKA_CONSUME"] = "pure"
    return variant_raw_lane(bootstrap, topics, expected, start)


def variant_raw_lane_lowmem(
    bootstrap: str, topics: list[str], expected: int, start: int = 0
) -> dict[str, float]:
    return variant_raw_lane(bootstrap, topics, expected, start, lowmem=True)


def variant_raw_lane(
    bootstrap: str, topics: list[str], expected: int, start: int = 0, *, lowmem: bool = False
) -> dict[str, float]:
    import bytewax.operators as op
    import pyarrow.dataset as ds
    from bytewax.dataflow import Dataflow
    from bytewax.testing import run_main

    from thalweg_bytewax.connectors.kafka import KafkaSource
    from thalweg_bytewax.connectors.parquet import ParquetSink

    lane = Path(tempfile.mkdtemp(prefix="twg-bench-lane-"))
    try:
        flow = Dataflow("bench_raw_lane")
        # lowmem: small per-partition buffers, so that the bench's small partitions
        # saturate them and peak RSS shows its bound rather than the data size.
        add_config = {"queued.max.messages.kbytes": 1024} if lowmem else None
        source = KafkaSource(
            [bootstrap],
            topics,
            tail=False,
            starting_offset=start or "earliest",
            add_config=add_config,
            batch_size=2_000 if lowmem else 10_000,
        )
        raw = op.input("in", flow, source)
        sink = ParquetSink(lane, row_group_bytes=512 * 1024) if lowmem else ParquetSink(lane)
        op.output("lane", raw, sink)
        t0 = time.perf_counter()
        run_main(flow)
        elapsed = time.perf_counter() - t0
        table = ds.dataset(lane, format="parquet").to_table(columns=["_twg_source_value"])
        n = table.num_rows
        nbytes = sum(len(v) for v in table.column(0).to_pylist())
        if n != expected:
            msg = f"raw lane holds {n} records; expected {expected}"
            raise SystemExit(msg)
    finally:
        shutil.rmtree(lane, ignore_errors=True)
    return {"records": n, "bytes": nbytes, "seconds": elapsed}


VARIANTS = {
    "bare": variant_bare,
    "per-part": variant_per_part,
    "raw-lane": variant_raw_lane,
    "raw-lane-pure": variant_raw_lane_pure,
    "raw-lane-lowmem": variant_raw_lane_lowmem,
}


def _run_child(
    name: str, bootstrap: str, topics: list[str], expected: int, start: int
) -> dict[str, float]:
    args = [
        "--child",
        name.removesuffix("-half"),
        "--bootstrap",
        bootstrap,
        "--topics",
        ",".join(topics),
    ]
    return run_child(
        __file__, [*args, "--expected", str(expected), "--start", str(start)], name=name
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=240_000)
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--repeat", type=int, default=2, help="runs per variant; the best is kept")
    parser.add_argument("--variants", default="", help="comma-separated subset to run")
    parser.add_argument("--child", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--topics", default="", help=argparse.SUPPRESS)
    parser.add_argument("--expected", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        result = VARIANTS[args.child](
            args.bootstrap, args.topics.split(","), args.expected, args.start
        )
        result["peak_rss_mb"] = peak_rss_mb()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        result["cpu_s"] = usage.ru_utime + usage.ru_stime
        print(json.dumps(result))
        return

    from thalweg_bytewax.testing import produce_sample_orders

    with broker(args.bootstrap) as bootstrap:
        n_topics = max(1, -(-args.records // RECORDS_PER_TOPIC))
        per_topic = args.records // n_topics
        stamp = int(time.time())
        topics = [f"bench-orders-{stamp}-{i}" for i in range(n_topics)]
        t0 = time.perf_counter()
        for i, topic in enumerate(topics):
            produce_sample_orders(bootstrap, topic, per_topic, seed=i, partitions=[0, 1, 2, 3])
        total = per_topic * n_topics
        took = time.perf_counter() - t0
        print(f"produced {total:,} orders to {n_topics} topics x 4 partitions in {took:.1f} s")
        check_retention(bootstrap, topics)

        per_partition = per_topic // 4
        middle = per_partition // 2
        plan = [
            ("bare", total, 0),
            ("per-part", total, 0),
            ("raw-lane", total, 0),
            ("raw-lane-pure", total, 0),
            ("raw-lane-half", (per_partition - middle) * 4 * n_topics, middle),
            ("raw-lane-lowmem", total, 0),
            ("raw-lane-lowmem-half", (per_partition - middle) * 4 * n_topics, middle),
        ]
        if args.variants:
            wanted = set(args.variants.split(","))
            plan = [step for step in plan if step[0] in wanted]
        results: dict[str, dict[str, float]] = {}
        for name, expected, start in plan:
            runs = [
                _run_child(name, bootstrap, topics, expected, start) for _ in range(args.repeat)
            ]
            best = min(runs, key=lambda r: r["seconds"])
            best["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
            results[name] = best

        print(
            f"\n{'variant':<21}{'records':>10}{'records/s':>12}{'MB/s':>8}"
            f"{'CPU us/rec':>12}{'peak RSS MB':>13}"
        )
        for name, r in results.items():
            rps = r["records"] / r["seconds"]
            mbps = r["bytes"] / r["seconds"] / 1e6
            cpu = r["cpu_s"] / r["records"] * 1e6
            print(
                f"{name:<21}{int(r['records']):>10,}{rps:>12,.0f}{mbps:>8.1f}{cpu:>12.2f}"
                f"{r['peak_rss_mb']:>13.0f}"
            )
        if "bare" in results:
            bare = results["bare"]["records"] / results["bare"]["seconds"]
            for name in ("raw-lane", "raw-lane-pure"):
                if name in results:
                    rps = results[name]["records"] / results[name]["seconds"]
                    print(f"{name} / bare = {rps / bare:.2f}")


if __name__ == "__main__":
    main()
