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
* ``raw-lane-w2`` — the same flow, two workers in one process (``-w 2``);
* ``raw-lane-2p`` / ``raw-lane-4p`` — the same flow, two / four processes of one
                  worker (``-i 0/1 -a``);
* ``orders`` / ``orders-2p`` / ``orders-4p`` — the flagship ``flows.orders`` (raw lane,
                  decode, dedup, contract, SQL, the revenue window, three Iceberg tables)
                  over the same topics, in one / two / four processes of one worker; each
                  process also reports the records it pickled to another process
                  (``crossings``), its own CPU and its peak RSS;
* ``source``    — the raw lane's source alone: ``KafkaSource(tail=False)`` into a sink
                  that counts the rows of its RawBatches (the native consume, the
                  RawBatch, the record ids and Bytewax, without the Parquet sink);
* ``stock`` / ``stock-2p`` / ``stock-4p`` — a stock Bytewax flow that does next to
                  nothing: ``bytewax.connectors.kafka.KafkaSource`` (one item a message)
                  into a sink that counts; what Bytewax and Timely cost per process;
* ``raw-lane-lowmem`` — the same flow with small per-partition bounds (256 KiB
                  prefetch and fetch, 1,000-record polls, 256 KiB row groups) and
                  0.5 s epochs (a staging file keeps each row group's footer metadata
                  until the epoch's snapshot closes it);
* ``raw-lane-lowmem-mmap`` — ``raw-lane-lowmem`` in a process started with
                  ``MALLOC_MMAP_THRESHOLD_=524288`` (glibc serves allocations of
                  512 KiB and more with their own mappings; see docs/benchmarks.md);
* ``decode-lowmem`` — ``KafkaSource -> twg.decode (AvroCodec) -> ParquetSink`` (+ DLQ
                  sink) with the bounds and epochs of ``raw-lane-lowmem``;
  ``decode-lowmem-mmap`` the same with ``MALLOC_MMAP_THRESHOLD_=524288``.
* ``raw-lane-jemalloc``, ``raw-lane-system`` — ``raw-lane`` with Arrow's memory pool
                  chosen by ``ARROW_DEFAULT_MEMORY_POOL`` (pyarrow's wheels default to
                  mimalloc).

Records/s is timed around the flow (``run_main``; for ``-2p`` from the first process's
start of the flow to the last one's end) or the bare loop, so interpreter start-up and
imports are left out of it. CPU is user + system over **all** processes of a variant
(``RUSAGE_CHILDREN`` around it: librdkafka's threads, start-up, imports and the second
process of ``-2p`` included), less the CPU of the check that the lane holds every record
(it reads the value column back). With ``--double`` each variant also runs over the second
half of every partition (1x; the full partitions are 2x): peak RSS at 1x and 2x
shows whether memory grows with the records per partition, and the **marginal** CPU
per record, (CPU at 2x - CPU at 1x) / (records at 2x - records at 1x), cancels the
fixed start-up cost, which is what shows whether ``-w 2`` or two processes raise the
cost of a record; **faults/rec** is the same difference of the minor page faults (first
touches of fresh memory). With ``--repeat`` > 1, CPU figures are min/median/max over the runs.

Usage::

    python benchmarks/raw_lane.py --records 240000
    python benchmarks/raw_lane.py --records 240000 --variants bare,raw-lane,raw-lane-pure
    python benchmarks/raw_lane.py --records 240000 --repeat 5 --double \
        --variants raw-lane,raw-lane-w2,raw-lane-2p
    python benchmarks/raw_lane.py --records 160000 --per-partition 40000 --repeat 5 \
        --double --variants orders,orders-2p,orders-4p

``--profile DIR`` writes a cProfile of every worker thread of every flow process to
``DIR`` (``<variant>-<pid>-<n>.prof``; read with ``python -m pstats``), timed in the
thread's CPU time, so a worker waiting for a lock or another process costs nothing.

It starts librdkafka's mock cluster unless ``--bootstrap`` names a broker (``apache``:
an Apache Kafka node started for the run). The mock
keeps ~5 MB of (LZ4-compressed) record batches per partition, so records are spread over
several 4-partition topics, ``--per-partition`` records each (15,000 by default, ~1.5 MB;
up to ~45,000 sample orders fit). Memory is flat when the 1x run already reaches the
steady state: with 5,000-record producer batches, ``--per-partition 40000`` (1x: 20,000)::

    python benchmarks/raw_lane.py --records 640000 --per-partition 40000 --repeat 3 \
        --double --variants raw-lane-lowmem,raw-lane-lowmem-mmap,decode-lowmem,decode-lowmem-mmap

At the default bounds the 1x run must pass them too; zstd batches (``--compression
zstd``) fit ~60,000 sample orders a partition::

    python benchmarks/raw_lane.py --records 960000 --per-partition 60000 --compression zstd \
        --repeat 3 --double --variants bare,raw-lane,raw-lane-w2,raw-lane-2p
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import (  # noqa: E402
    COMPRESSIONS,
    broker,
    byte_compile,
    check_retention,
    peak_rss_mb,
    run_processes,
)

PER_PARTITION = 15_000  # ~1.5 MB of LZ4 batches, under the mock's ~5 MB retention
LOWMEM_EPOCH_S = 0.5
# The child process of a variant gets these environment variables.
_MMAP_512K = {"MALLOC_MMAP_THRESHOLD_": str(512 * 1024)}
VARIANT_ENV = {
    "raw-lane-lowmem-mmap": _MMAP_512K,
    "decode-lowmem-mmap": _MMAP_512K,
    "raw-lane-jemalloc": {"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"},
    "raw-lane-system": {"ARROW_DEFAULT_MEMORY_POOL": "system"},
}


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
    c.assign([TopicPartition(t, p, start) for t, p in _partitions(topics)])
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
        c.assign([TopicPartition(t, p, start)])
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


def variant_decode_lowmem(
    bootstrap: str, topics: list[str], expected: int, start: int = 0
) -> dict[str, float]:
    return variant_raw_lane(bootstrap, topics, expected, start, lowmem=True, decode=True)


def variant_raw_lane_w2(
    bootstrap: str, topics: list[str], expected: int, start: int = 0
) -> dict[str, float]:
    return variant_raw_lane(bootstrap, topics, expected, start, workers=2)


def variant_raw_lane_2p(
    bootstrap: str, topics: list[str], expected: int, start: int = 0
) -> dict[str, float]:
    """Two processes of one worker; this one only starts them and reads the lane."""
    return variant_cluster("raw-lane", 2, bootstrap, topics, expected, start)


def variant_cluster(
    kind: str, processes: int, bootstrap: str, topics: list[str], expected: int, start: int = 0
) -> dict[str, Any]:
    """``processes`` processes of one worker running ``kind``; this one starts them.

    Returns the variant's figures and, under ``processes``, each process's own:
    its wall span, peak RSS, CPU and crossings.
    """
    root = Path(tempfile.mkdtemp(prefix=f"twg-bench-{kind}-"))
    base = [sys.executable, __file__, "--child", kind, "--bootstrap", bootstrap]
    base += ["--topics", ",".join(topics), "--start", str(start), "--lane", str(root)]
    try:
        outs = run_processes(base, name=f"{kind}-{processes}p", count=processes)
        n, nbytes, check_cpu_s = _check(kind, root, expected, outs)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    seconds = max(o["end"] for o in outs) - min(o["begin"] for o in outs)
    return {
        "records": n,
        "bytes": nbytes,
        "seconds": seconds,
        "peak_rss_mb": sum(o["peak_rss_mb"] for o in outs),
        "check_cpu_s": check_cpu_s,
        "processes": outs,  # type: ignore[dict-item]
    }


def _variant_of(kind: str, processes: int) -> Any:
    def run(bootstrap: str, topics: list[str], expected: int, start: int = 0) -> dict[str, Any]:
        if processes == 1:
            return _single(kind, bootstrap, topics, expected, start)
        return variant_cluster(kind, processes, bootstrap, topics, expected, start)

    return run


def _single(
    kind: str, bootstrap: str, topics: list[str], expected: int, start: int
) -> dict[str, Any]:
    """``kind`` in this process, one worker; its figures as a cluster process's."""
    from bytewax.testing import run_main

    root = Path(tempfile.mkdtemp(prefix=f"twg-bench-{kind}-"))
    try:
        flow, counted = _build(kind, bootstrap, topics, start, root)
        begin = time.time()
        run_main(flow, epoch_interval=_epoch())  # type: ignore[no-untyped-call]
        own = _own_figures(begin, counted)
        n, nbytes, check_cpu_s = _check(kind, root, expected, [own])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "records": n,
        "bytes": nbytes,
        "seconds": own["end"] - begin,
        "peak_rss_mb": own["peak_rss_mb"],
        "check_cpu_s": check_cpu_s,
        "processes": [own],  # type: ignore[dict-item]
    }


def _check(
    kind: str, root: Path, expected: int, outs: list[dict[str, Any]]
) -> tuple[int, int, float]:
    """What landed, checked against ``expected``: the lane's, or the stock sink's count."""
    if kind in ("stock", "source"):
        n = sum(int(o["counted"]) for o in outs)
        if n != expected:
            raise SystemExit(f"{kind} flow counted {n} records; expected {expected}")
        return n, 0, 0.0
    return _check_lane(root / "raw" if kind == "orders" else root, expected)


def _check_lane(lane: Path, expected: int) -> tuple[int, int, float]:
    """Records and value bytes the lane holds, checked against ``expected``, and CPU spent.

    The CPU is the benchmark's own, left out of the variant's.
    """
    check_from = _own_cpu_s()
    n, nbytes = _read_lane(lane)
    if n != expected:
        msg = f"raw lane holds {n} records; expected {expected}"
        raise SystemExit(msg)
    return n, nbytes, _own_cpu_s() - check_from


def _read_lane(lane: Path) -> tuple[int, int]:
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    # Hidden names (the decode variant's schemas and DLQ) are left out, as datasets do.
    dataset = ds.dataset(lane, format="parquet")
    if "_twg_source_value" not in dataset.schema.names:  # decoded rows: counted only
        return dataset.count_rows(), 0
    table = dataset.to_table(columns=["_twg_source_value"])
    return table.num_rows, int(pc.sum(pc.binary_length(table.column(0))).as_py() or 0)


def _flow(
    bootstrap: str, topics: list[str], start: int, lane: Path, *, lowmem: bool, decode: bool = False
) -> object:
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow

    from thalweg_bytewax.connectors.kafka import KafkaSource
    from thalweg_bytewax.connectors.parquet import ParquetSink

    flow = Dataflow("bench_raw_lane")
    # lowmem: per-partition bounds (~1 MiB in all) below the bench's partitions (~2 MB
    # at 1x; the mock broker keeps ~5 MB a partition), so peak RSS shows the bound.
    librdkafka = (
        {"queued.max.messages.kbytes": 256, "max.partition.fetch.bytes": 256 * 1024}
        if lowmem
        else None
    )
    source = KafkaSource(
        [bootstrap],
        topics,
        tail=False,
        starting_offset=start or "earliest",
        librdkafka=librdkafka,
        batch_size=1_000 if lowmem else 10_000,
    )
    raw = op.input("in", flow, _profiled(source))
    sink = ParquetSink(lane, row_group_bytes=256 * 1024) if lowmem else ParquetSink(lane)
    if not decode:
        op.output("lane", raw, sink)
        return flow
    import thalweg_bytewax.operators as twg
    from thalweg_bytewax.codecs import AvroCodec
    from thalweg_bytewax.dev.samples import ORDER_AVRO_SCHEMA, ORDER_SCHEMA_ID
    from thalweg_bytewax.registry import DirectorySchemaSource

    schemas = lane / ".schemas"
    schemas.mkdir()
    (schemas / f"{ORDER_SCHEMA_ID}.avsc").write_text(json.dumps(ORDER_AVRO_SCHEMA))
    decoded = twg.decode("decode", raw, AvroCodec(DirectorySchemaSource(schemas)))
    op.output("orders", decoded.ok, sink)
    dlq = lane / ".dlq"
    op.output("dlq", decoded.rejected, ParquetSink(dlq, row_group_bytes=256 * 1024))
    return flow


def variant_raw_lane(
    bootstrap: str,
    topics: list[str],
    expected: int,
    start: int = 0,
    *,
    lowmem: bool = False,
    workers: int = 1,
    decode: bool = False,
) -> dict[str, float]:
    from datetime import timedelta

    from bytewax.testing import cluster_main, run_main

    lane = Path(tempfile.mkdtemp(prefix="twg-bench-lane-"))
    try:
        flow = _flow(bootstrap, topics, start, lane, lowmem=lowmem, decode=decode)
        epoch = timedelta(seconds=LOWMEM_EPOCH_S) if lowmem else None
        t0 = time.perf_counter()
        if workers > 1:
            cluster_main(flow, [], 0, worker_count_per_proc=workers)  # type: ignore[no-untyped-call]
        else:
            run_main(flow, epoch_interval=epoch)  # type: ignore[no-untyped-call]
        elapsed = time.perf_counter() - t0
        # Before the check below, which reads the whole value column back.
        rss = peak_rss_mb()
        _dump_profiles()
        n, nbytes, check_cpu_s = _check_lane(lane, expected)
    finally:
        shutil.rmtree(lane, ignore_errors=True)
    return {
        "records": n,
        "bytes": nbytes,
        "seconds": elapsed,
        "peak_rss_mb": rss,
        "check_cpu_s": check_cpu_s,
    }


def _own_cpu_s() -> float:
    """User + system CPU of this process so far, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _process_of_2p(args: argparse.Namespace) -> None:
    """One process of a ``-Np`` variant: its part of the flow, timed on the wall clock."""
    from bytewax.testing import cluster_main

    from thalweg_bytewax.runtime.placement import declare_cluster

    addresses = args.addresses.split(",")
    # What `python -m bytewax.run -i/-a` tells placement: each partition read, and its
    # state and shards kept, on one worker (docs/scaling.md).
    declare_cluster(process_id=args.proc_id, processes=len(addresses))
    flow, counted = _build(
        args.child, args.bootstrap, args.topics.split(","), args.start, Path(args.lane)
    )
    begin = time.time()
    cluster_main(flow, addresses, args.proc_id, epoch_interval=_epoch())  # type: ignore[no-untyped-call]
    print(json.dumps(_own_figures(begin, counted)))


def _epoch() -> Any:
    """The epoch interval ``--epoch-s`` asked for; None: Bytewax's 10 s."""
    from datetime import timedelta

    seconds = os.environ.get("BENCH_EPOCH_S")
    return timedelta(seconds=float(seconds)) if seconds else None


def _own_figures(begin: float, counted: list[int]) -> dict[str, Any]:
    """This process's wall span, peak RSS, CPU, records pickled and, if any, counted."""
    from thalweg_bytewax.runtime.crossings import crossings

    _dump_profiles()
    return {
        "begin": begin,
        "end": time.time(),
        "peak_rss_mb": peak_rss_mb(),
        "cpu_s": _own_cpu_s(),
        "counted": sum(counted),
        **crossings().as_dict(),
    }


def _build(
    kind: str, bootstrap: str, topics: list[str], start: int, root: Path
) -> tuple[object, list[int]]:
    """The flow of ``kind`` writing under ``root``, and the count its stock sink keeps."""
    counted: list[int] = []
    if kind == "raw-lane":
        return _flow(bootstrap, topics, start, root, lowmem=False), counted
    if kind == "stock":
        return _stock_flow(bootstrap, topics, start, counted), counted
    if kind == "source":
        return _source_flow(bootstrap, topics, start, counted), counted
    from thalweg_bytewax.connectors.kafka import KafkaSource
    from thalweg_bytewax.flows.orders import OrdersSettings
    from thalweg_bytewax.flows.orders import build_flow as build_orders

    settings = OrdersSettings(
        data_dir=root, bootstrap_servers=bootstrap, topic=topics[0], tail=False
    )
    source = KafkaSource([bootstrap], topics, tail=False, starting_offset=start or "earliest")
    return build_orders(settings, source=_profiled(source)), counted


def _source_flow(bootstrap: str, topics: list[str], start: int, counted: list[int]) -> object:
    """The raw lane's source alone: its RawBatches into a sink that counts their rows."""
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.outputs import DynamicSink, StatelessSinkPartition

    from thalweg_bytewax.connectors.kafka import KafkaSource

    class _Count(StatelessSinkPartition):  # type: ignore[type-arg]
        def write_batch(self, items: list[Any]) -> None:
            counted.append(sum(batch.num_rows for _, batch in items))

    class _Sink(DynamicSink):  # type: ignore[type-arg]
        def build(self, step_id: str, worker_index: int, worker_count: int) -> _Count:
            return _Count()

    flow = Dataflow("bench_source")
    source = KafkaSource(
        [bootstrap], topics, tail=False, starting_offset=start or "earliest", batch_size=10_000
    )
    op.output("count", op.input("in", flow, _profiled(source)), _Sink())
    return flow


def _stock_flow(bootstrap: str, topics: list[str], start: int, counted: list[int]) -> object:
    """Stock Bytewax: its Kafka source, one item a message, into a sink that counts."""
    import bytewax.operators as op
    from bytewax.connectors.kafka import KafkaSource
    from bytewax.dataflow import Dataflow
    from bytewax.outputs import DynamicSink, StatelessSinkPartition

    class _Count(StatelessSinkPartition):  # type: ignore[type-arg]
        def write_batch(self, items: list[Any]) -> None:
            counted.append(len(items))

    class _Sink(DynamicSink):  # type: ignore[type-arg]
        def build(self, step_id: str, worker_index: int, worker_count: int) -> _Count:
            return _Count()

    flow = Dataflow("bench_stock")
    offset = start if start else -2  # OFFSET_BEGINNING
    source = KafkaSource([bootstrap], topics, tail=False, starting_offset=offset)
    op.output("count", op.input("in", flow, _profiled(source)), _Sink())
    return flow


_PROFILES: dict[int, Any] = {}


def _profiled(source: Any) -> Any:
    """``source``, profiling each worker thread that builds a partition (``--profile``)."""
    if not os.environ.get("BENCH_PROFILE_DIR"):
        return source
    import cProfile
    import ctypes
    import threading

    inner = source.build_part

    def build_part(*args: Any) -> Any:
        ident = threading.get_ident()
        if ident not in _PROFILES:
            # A Timely worker thread gets a fresh thread state each time it takes the GIL,
            # which would drop the profiler: one more hold keeps this one for the thread.
            ctypes.pythonapi.PyGILState_Ensure()
            _PROFILES[ident] = cProfile.Profile(time.thread_time)  # CPU, not waits
            _PROFILES[ident].enable()
        return inner(*args)

    source.build_part = build_part
    return source


def _dump_profiles() -> None:
    out = os.environ.get("BENCH_PROFILE_DIR")
    for i, prof in enumerate(_PROFILES.values()):
        prof.create_stats()
        prof.dump_stats(
            str(Path(out or ".") / f"{os.environ['BENCH_VARIANT']}-{os.getpid()}-{i}.prof")
        )


VARIANTS = {
    "bare": variant_bare,
    "per-part": variant_per_part,
    "raw-lane": variant_raw_lane,
    "raw-lane-pure": variant_raw_lane_pure,
    "raw-lane-jemalloc": variant_raw_lane,
    "raw-lane-system": variant_raw_lane,
    "raw-lane-lowmem": variant_raw_lane_lowmem,
    "raw-lane-lowmem-mmap": variant_raw_lane_lowmem,
    "decode-lowmem": variant_decode_lowmem,
    "decode-lowmem-mmap": variant_decode_lowmem,
    "raw-lane-w2": variant_raw_lane_w2,
    "raw-lane-2p": variant_raw_lane_2p,
    "raw-lane-4p": _variant_of("raw-lane", 4),
    "orders": _variant_of("orders", 1),
    "orders-2p": _variant_of("orders", 2),
    "orders-4p": _variant_of("orders", 4),
    "stock": _variant_of("stock", 1),
    "source": _variant_of("source", 1),
    "stock-2p": _variant_of("stock", 2),
    "stock-4p": _variant_of("stock", 4),
}


def _run_child(
    name: str, bootstrap: str, topics: list[str], expected: int, start: int
) -> dict[str, float]:
    """Run one variant in a fresh interpreter; CPU over all its processes."""
    args = ["--child", name.removesuffix("-1x"), "--bootstrap", bootstrap]
    args += ["--topics", ",".join(topics), "--expected", str(expected), "--start", str(start)]
    env = {**os.environ, **VARIANT_ENV.get(name.removesuffix("-1x"), {}), "BENCH_VARIANT": name}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=False, env=env
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"variant {name} failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    # The check that the lane holds every record is the benchmark's, not the flow's.
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result["cpu_s"] = cpu_s - result.pop("check_cpu_s", 0.0)
    # First touches of fresh memory (the check's included: it reads the same column
    # at 1x and 2x per record, so a marginal figure keeps a share of it).
    result["minflt"] = after.ru_minflt - before.ru_minflt
    return result


def _spread(values: list[float], digits: int = 2) -> str:
    """min/median/max, or the one value."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    points = (min(values), statistics.median(values), max(values))
    return "/".join(f"{v:.{digits}f}" for v in points)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=240_000)
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--repeat", type=int, default=2, help="runs per variant, alternated")
    parser.add_argument(
        "--per-partition", type=int, default=PER_PARTITION, help="records per partition"
    )
    parser.add_argument("--variants", default="", help="comma-separated subset to run")
    parser.add_argument(
        "--compression",
        default="lz4",
        choices=COMPRESSIONS,
        help="the producer's compression.type (zstd fits ~1.4x the orders of lz4)",
    )
    parser.add_argument(
        "--double", action="store_true", help="also run each variant on half of every partition"
    )
    parser.add_argument(
        "--small",
        type=float,
        default=0.5,
        help="with --double, the share of every partition (its end) the small run reads",
    )
    parser.add_argument(
        "--epoch-s",
        type=float,
        default=0,
        help="epoch interval of the orders and stock variants (0: Bytewax's 10 s)",
    )
    parser.add_argument("--save", default="", help="append each run's figures to this file")
    parser.add_argument(
        "--profile", default="", help="write a cProfile of each flow process's workers here"
    )
    parser.add_argument("--child", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--topics", default="", help=argparse.SUPPRESS)
    parser.add_argument("--expected", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--lane", default="", help=argparse.SUPPRESS)
    parser.add_argument("--proc-id", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--addresses", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.proc_id is not None:
        _process_of_2p(args)
        return
    if args.child:
        result = VARIANTS[args.child](
            args.bootstrap, args.topics.split(","), args.expected, args.start
        )
        result.setdefault("peak_rss_mb", peak_rss_mb())
        print(json.dumps(result))
        return

    from thalweg_bytewax.testing import produce_sample_orders

    byte_compile()
    if args.epoch_s:
        os.environ["BENCH_EPOCH_S"] = str(args.epoch_s)
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        os.environ["BENCH_PROFILE_DIR"] = str(Path(args.profile).resolve())
    with broker(args.bootstrap) as bootstrap:
        n_topics = max(1, -(-args.records // (4 * args.per_partition)))
        per_topic = args.records // n_topics
        stamp = int(time.time())
        topics = [f"bench-orders-{stamp}-{i}" for i in range(n_topics)]
        t0 = time.perf_counter()
        for i, topic in enumerate(topics):
            produce_sample_orders(
                bootstrap,
                topic,
                per_topic,
                seed=i,
                partitions=[0, 1, 2, 3],
                compression=args.compression,
            )
        total = per_topic * n_topics
        took = time.perf_counter() - t0
        print(
            f"produced {total:,} orders ({args.compression} batches) to {n_topics} topics"
            f" x 4 partitions in {took:.1f} s"
        )
        print(f"driver peak RSS {peak_rss_mb():.0f} MB (not counted in a variant's)")
        check_retention(bootstrap, topics)

        per_partition = per_topic // 4
        middle = per_partition - round(per_partition * args.small)
        half = (per_partition - middle) * 4 * n_topics
        names = list(VARIANTS)
        if args.variants:
            wanted = args.variants.split(",")
            unknown = sorted(set(wanted) - set(names))
            if unknown:
                raise SystemExit(f"unknown variants {unknown}; expected some of {names}")
            names = [n for n in names if n in wanted]
        plan = [(name, total, 0) for name in names]
        if args.double:
            plan += [(f"{n}-1x", half, middle) for n in names]
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in plan}
        loads = [os.getloadavg()]
        for i in range(args.repeat):  # alternated, so a slow spell hits every variant
            for name, expected, start in plan if i % 2 == 0 else plan[::-1]:
                runs[name].append(_run_child(name, bootstrap, topics, expected, start))
                if args.save:  # each run as it ends, so an interrupted session keeps them
                    with open(args.save, "a", encoding="utf-8") as out:
                        out.write(json.dumps({"variant": name, **runs[name][-1]}) + "\n")
            loads.append(os.getloadavg())
        print("load average (1, 5, 15 min) at the start and after each round:")
        print("  " + "  ".join("/".join(f"{v:.2f}" for v in load) for load in loads))
        _report(runs, double=args.double)
        _report_processes(runs, double=args.double)


def _report(runs: dict[str, list[dict[str, float]]], *, double: bool) -> None:
    print(
        f"\n{'variant':<18}{'records':>9}{'records/s':>11}{'MB/s':>7}"
        f"{'CPU us/rec min/med/max':>26}{'peak RSS MB':>14}"
        + (f"{'RSS 1x':>14}{'marginal CPU us/rec':>24}{'faults/rec':>20}" if double else "")
    )
    rates: dict[str, float] = {}
    for name, rs in runs.items():
        if name.endswith("-1x"):
            continue
        n = rs[0]["records"]
        rate = statistics.median(r["records"] / r["seconds"] for r in rs)
        rates[name] = rate
        mbps = statistics.median(r["bytes"] / r["seconds"] for r in rs) / 1e6
        cpu = [r["cpu_s"] / r["records"] * 1e6 for r in rs]
        rss = _spread([r["peak_rss_mb"] for r in rs], 0)
        line = f"{name:<18}{int(n):>9,}{rate:>11,.0f}{mbps:>7.1f}{_spread(cpu):>26}{rss:>14}"
        ones = runs.get(f"{name}-1x")
        if double and ones:
            rss1 = _spread([r["peak_rss_mb"] for r in ones], 0)
            n1 = ones[0]["records"]
            # Run i at 2x against run i at 1x: the pairs ran back to back.
            marginal = [
                (two["cpu_s"] - one["cpu_s"]) / (n - n1) * 1e6
                for two, one in zip(rs, ones, strict=True)
            ]
            faults = [
                (two.get("minflt", 0) - one.get("minflt", 0)) / (n - n1)
                for two, one in zip(rs, ones, strict=True)
            ]
            line += f"{rss1:>14}{_spread(marginal):>24}{_spread(faults, 3):>20}"
        print(line)
    if "bare" in rates:
        for name, rate in rates.items():
            if name.startswith("raw-lane"):
                print(f"{name} / bare = {rate / rates['bare']:.2f}")


def _marginals(runs: dict[str, list[dict[str, Any]]], name: str) -> list[float]:
    """Marginal CPU us a record of each pair of runs of ``name`` (2x against 1x)."""
    twos, ones = runs[name], runs[f"{name}-1x"]
    added = twos[0]["records"] - ones[0]["records"]
    return [(t["cpu_s"] - o["cpu_s"]) / added * 1e6 for t, o in zip(twos, ones, strict=True)]


def _report_processes(runs: dict[str, list[dict[str, Any]]], *, double: bool) -> None:
    """Per process of each variant: CPU, peak RSS, records pickled; marginal vs one process."""
    shown = [n for n in runs if not n.endswith("-1x") and "processes" in runs[n][0]]
    if not shown:
        return
    print(
        f"\n{'variant (2x run)':<18}{'CPU s per process':>26}{'peak RSS MB per process':>30}"
        f"{'RSS total':>10}{'records pickled':>17}{'other rows':>12}"
        + (f"{'marginal x 1 process':>22}" if double else "")
    )
    for name in shown:
        rs = runs[name]
        procs = len(rs[0]["processes"])

        def med(key: str, i: int, rs: list[dict[str, Any]] = rs) -> float:
            return statistics.median(r["processes"][i][key] for r in rs)

        cpu = "/".join(f"{med('cpu_s', i):.1f}" for i in range(procs))
        rss = "/".join(f"{med('peak_rss_mb', i):.0f}" for i in range(procs))
        total = statistics.median(sum(p["peak_rss_mb"] for p in r["processes"]) for r in rs)
        pickled = max(sum(p["records_pickled"] for p in r["processes"]) for r in rs)
        other = max(sum(p["other_rows_pickled"] for p in r["processes"]) for r in rs)
        line = f"{name:<18}{cpu:>26}{rss:>30}{total:>10.0f}{pickled:>17,}{other:>12,}"
        one = re.sub(r"-\dp$", "", name)
        if double and f"{name}-1x" in runs and f"{one}-1x" in runs:
            ratio = statistics.median(_marginals(runs, name)) / statistics.median(
                _marginals(runs, one)
            )
            line += f"{ratio:>21.2f}x"
        print(line)


if __name__ == "__main__":
    main()
