"""End to end: Kafka -> decode -> Parquet, Bytewax's stock connector against thalweg's.

Produces N records per shape and format — Confluent-framed Avro and JSON (orjson of the
same records; decimals as strings, datetimes as ISO 8601) — to a local broker, in two
shapes: ``sample`` (the sample orders: uuid, decimals, timestamp, enum, nested record,
union) and ``plain`` (strings, a double, a long, an array of one to three line records;
no logical types). Then runs each variant in its own process:

* ``stock-<fmt>`` — what a user of stock Bytewax writes:
  ``bytewax.connectors.kafka.KafkaSource`` (one item per message), a ``map`` that
  deserializes each message into a dict (fastavro ``schemaless_reader`` with a parsed
  schema after the 5-byte Confluent prefix / ``orjson.loads``), and a sink that buffers
  dicts and writes a Parquet file per 10k rows with ``pa.Table.from_pylist`` with the
  explicit schema + ``pq.write_table``;
* ``naive-<fmt>`` — a script without Bytewax: one ``Consumer`` on every partition,
  ``consume()`` in a loop, the values of each 10k decoded at once
  (``pyarrow.json.read_json`` with the explicit schema / fastavro per value into
  ``from_pylist`` with the explicit schema) and written with ``pq.write_table``;
* ``thalweg-<fmt>`` — ``KafkaSource -> decode -> ParquetSink`` (decoded lane with the
  locator columns, DLQ to its own ParquetSink), ``AvroCodec`` over a schema directory /
  ``JsonCodec`` over a JSON Schema, reading with the native batch consume when built;
* ``thalweg-<fmt>-pure`` — the same through confluent-kafka's ``Message`` objects
  (``THALWEG_KAFKA_CONSUME=pure``);
* ``thalweg-<fmt>-lane`` — the same flow writing the raw lane too (``KafkaSource ->
  ParquetSink`` beside the decode), as ``flows.orders`` does;
* ``thalweg-<fmt>-w2`` — the same flow with two workers in one process (``-w 2``);
* ``thalweg-<fmt>-2p`` — the same flow in two processes of one worker each (``-i 0/1 -a``);
* ``floor-<fmt>-consume`` and ``floor-<fmt>-parts`` — the floor of the job, its parts each
  measured alone on the same topics (``benchmarks/_floor.py``): librdkafka's fetch and
  decompression through the native batch consume, the fastest batch parse, the record
  ids, the Parquet write of the decoded table. The report sums their marginal CPU and
  sets the flows against it;
* ``stock-<fmt>-first`` and ``thalweg-<fmt>-first`` — start-up: the stock and thalweg
  flows with an ``inspect`` after the deserialize / decode step noting the seconds from
  the driver's clock before it started the process to the first record, and the CPU
  the process had spent by then (run on the 1x topics only).

Every figure is of the whole variant: wall time and CPU seconds (user + system) from the
variant's process start to its exit, summed over all its processes (the driver reads
``RUSAGE_CHILDREN`` around each run, so the second process of ``-2p`` and librdkafka's
threads count), start-up and imports included. Peak RSS is the variant's process (for
``-2p`` the sum of both). ``--double`` also runs every variant on twice the records per
partition (same partitions), to show peak RSS flat and the marginal CPU per record (the
difference of the two runs divided by the added records: start-up cancels out). Usage::

    python benchmarks/decode_e2e.py --records 200000 --repeat 3 --double

Before the runs the driver byte-compiles the project's own packages (``compileall``,
what ``pip install`` does for an installed wheel): without it, an editable checkout run
with ``PYTHONDONTWRITEBYTECODE`` set recompiles every thalweg module from source in
each variant process (~0.2 s of CPU), a start-up cost no installed user pays, while
the stock variant's dependencies come precompiled from ``site-packages``.

The floor and start-up against stock Bytewax, plain and sample orders::

    python benchmarks/decode_e2e.py --records 160000 --partitions 16 --compression zstd \
        --repeat 3 --double --shape plain --format json \
        --kinds stock,naive,thalweg,floor-consume,floor-parts
    python benchmarks/decode_e2e.py --records 16000 --partitions 16 --compression zstd \
        --repeat 5 --shape plain --format json --kinds stock-first,thalweg-first

Each run's figures are printed as a JSON line as it ends, the tables after the last.

It starts librdkafka's mock cluster unless ``--bootstrap`` names a broker (``apache``:
an Apache Kafka node started for the run). The mock
keeps ~5 MB of record batches per partition, as stored, so records are spread over
several 4-partition topics. ``--partitions N`` fixes their number instead, and
``--compression zstd`` has the producer compress its batches (2-6x the records fit a
partition): with both, the 1x run can pass the default per-partition bounds of the
source and sinks, which is what shows peak RSS flat at the defaults (docs/benchmarks.md,
"Speed at a glance")::

    python benchmarks/decode_e2e.py --records 720000 --partitions 16 --compression zstd \
        --repeat 3 --double --shape plain --format json
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
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

from _decode_shapes import SHAPES, Shape, shape  # noqa: E402
from _harness import (  # noqa: E402
    COMPRESSIONS,
    broker,
    check_retention,
    peak_rss_mb,
    run_processes,
)

# Per topic (4 partitions), under the mock broker's ~5 MB per partition retention:
# sample Avro orders are ~130 bytes, JSON ~405 bytes (plain: ~80 / ~180).
PER_TOPIC = {"avro": 60_000, "json": 32_000}
STOCK_ROWS_PER_FILE = 10_000


def _count_rows(path: Path) -> int:
    import pyarrow.dataset as ds

    return ds.dataset(path, format="parquet").count_rows()


# -- variants (run in a child process) ---------------------------------------------------


# -- variants (run in a child process) ---------------------------------------------------


def _stock_sink(out: Path, schema: Any):  # type: ignore[no-untyped-def]
    import pyarrow as pa
    import pyarrow.parquet as pq
    from bytewax.outputs import DynamicSink, StatelessSinkPartition

    class _Part(StatelessSinkPartition):  # type: ignore[type-arg]
        def __init__(self, worker: int) -> None:
            self.rows: list[dict[str, Any]] = []
            self.files = 0
            self.worker = worker

        def write_batch(self, items: list[dict[str, Any]]) -> None:
            self.rows.extend(items)
            if len(self.rows) >= STOCK_ROWS_PER_FILE:
                self._flush()

        def _flush(self) -> None:
            if self.rows:
                table = pa.Table.from_pylist(self.rows, schema=schema)
                pq.write_table(table, out / f"part-{self.worker}-{self.files:05d}.parquet")
                self.files += 1
                self.rows = []

        def close(self) -> None:
            self._flush()

    class _Sink(DynamicSink):  # type: ignore[type-arg]
        def build(self, step_id: str, worker_index: int, worker_count: int) -> _Part:
            return _Part(worker_index)

    return _Sink()


def _first_record(flow: Any, step: str, stream: Any, t0: float) -> None:
    """Note the seconds from ``t0`` (the driver's clock before it started this process)."""
    import bytewax.operators as op

    def note(_step: str, _item: object) -> None:
        if "first_record_s" not in _FIRST:
            _FIRST["first_record_s"] = time.time() - t0
            # The CPU it took (all threads): what a loaded machine does not stretch.
            _FIRST["first_record_cpu_s"] = time.process_time()

    op.inspect(step, stream, note)


_FIRST: dict[str, float] = {}


def _stock_flow(  # type: ignore[no-untyped-def]
    shape: Shape, fmt: str, bootstrap: str, topics: list[str], out: Path, *, t0: float = 0.0
):
    import io

    import bytewax.operators as op
    import fastavro
    import orjson
    from bytewax.connectors.kafka import KafkaSource
    from bytewax.dataflow import Dataflow

    parsed = fastavro.parse_schema(shape.avro_schema)
    has_uuid = shape.name == "sample"

    def from_avro(msg: Any) -> dict[str, Any]:
        rec = fastavro.schemaless_reader(io.BytesIO(msg.value[5:]), parsed, None)
        if has_uuid:
            rec["order_id"] = str(rec["order_id"])  # from_pylist cannot take uuid.UUID
        return rec  # type: ignore[no-any-return]

    def from_json(msg: Any) -> dict[str, Any]:
        return orjson.loads(msg.value)  # type: ignore[no-any-return]

    flow = Dataflow("stock_decode")
    msgs = op.input("in", flow, KafkaSource([bootstrap], topics, tail=False))
    dicts = op.map("deserialize", msgs, from_avro if fmt == "avro" else from_json)
    if t0:
        _first_record(flow, "first", dicts, t0)
    op.output("parquet", dicts, _stock_sink(out, shape.arrow_schema(fmt)))
    return flow


def _thalweg_flow(  # type: ignore[no-untyped-def]
    shape: Shape,
    fmt: str,
    bootstrap: str,
    topics: list[str],
    out: Path,
    *,
    lane: bool = False,
    t0: float = 0.0,
):
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow

    import thalweg_bytewax.operators as twg
    from thalweg_bytewax.codecs import AvroCodec, JsonCodec
    from thalweg_bytewax.connectors.kafka import KafkaSource
    from thalweg_bytewax.connectors.parquet import ParquetSink
    from thalweg_bytewax.registry import DirectorySchemaSource

    if fmt == "avro":
        schemas = out / "schemas"
        schemas.mkdir(parents=True, exist_ok=True)
        (schemas / f"{shape.schema_id}.avsc").write_text(json.dumps(shape.avro_schema))
        codec: Any = AvroCodec(DirectorySchemaSource(schemas))
    else:
        codec = JsonCodec(shape.json_schema)
    flow = Dataflow("thalweg_decode")
    raw = op.input("in", flow, KafkaSource([bootstrap], topics, tail=False))
    if lane:  # the raw lane beside the decode, as flows.orders writes it
        op.output("raw_lane", raw, ParquetSink(out / "raw"))
    decoded = twg.decode("decode", raw, codec)
    if t0:
        _first_record(flow, "first", decoded.ok, t0)
    op.output("orders", decoded.ok, ParquetSink(out / "orders"))
    op.output("dlq", decoded.rejected, ParquetSink(out / "dlq"))
    return flow


def _naive(
    shape: Shape, fmt: str, bootstrap: str, topics: list[str], out: Path, expected: int
) -> None:
    import io

    import fastavro
    import pyarrow as pa
    import pyarrow.json as pj
    import pyarrow.parquet as pq
    from confluent_kafka import Consumer, TopicPartition

    from thalweg_bytewax.connectors.kafka._config import consumer_config

    schema = shape.arrow_schema(fmt)
    parsed = fastavro.parse_schema(shape.avro_schema)
    has_uuid = shape.name == "sample"
    c = Consumer(consumer_config([bootstrap], None))
    c.assign([TopicPartition(t, p, 0) for t in topics for p in range(4)])
    values: list[bytes] = []
    n = files = 0

    def flush() -> None:
        nonlocal values, files
        if fmt == "json":
            table = pj.read_json(
                io.BytesIO(b"\n".join(values)),
                parse_options=pj.ParseOptions(explicit_schema=schema),
            )
        else:
            rows = []
            for v in values:
                rec = fastavro.schemaless_reader(io.BytesIO(v[5:]), parsed, None)
                if has_uuid:
                    rec["order_id"] = str(rec["order_id"])
                rows.append(rec)
            table = pa.Table.from_pylist(rows, schema=schema)
        pq.write_table(table, out / f"part-{files:05d}.parquet")
        files += 1
        values = []

    while n < expected:
        for m in c.consume(10_000, timeout=0.1):
            if m.error() is None:
                values.append(m.value())
                n += 1
        if len(values) >= STOCK_ROWS_PER_FILE:
            flush()
    if values:
        flush()
    c.close()


def run_variant(args: argparse.Namespace) -> dict[str, float]:
    """Run one variant (``--child``) to its end and check every record reached Parquet."""
    name: str = args.child
    shape_ = shape(args.shape[-1])
    topics = args.topics.split(",")
    kind, fmt, *mode = name.split("-")
    if "pure" in mode:
        os.environ["THALWEG_KAFKA_CONSUME"] = "pure"
    if "2p" not in mode or args.proc_id is not None:  # the coordinator of `-2p` runs no flow
        from bytewax.testing import cluster_main, run_main
    if args.proc_id is not None:  # one process of a `-2p` run
        flow = _thalweg_flow(shape_, fmt, args.bootstrap, topics, Path(args.out))
        cluster_main(flow, args.addresses.split(","), args.proc_id)
        return {"peak_rss_mb": peak_rss_mb()}
    if kind == "floor":
        import _floor

        if "consume" in mode:
            result = _floor.floor_consume(args.bootstrap, topics, args.expected)
        else:
            result = _floor.floor_parts(shape_, fmt, args.bootstrap, topics, args.expected)
        return {**result, "peak_rss_mb": peak_rss_mb()}
    out = Path(tempfile.mkdtemp(prefix=f"twg-bench-{name}-"))
    rss = 0.0
    first = args.t0 if "first" in mode else 0.0
    try:
        if kind == "naive":
            _naive(shape_, fmt, args.bootstrap, topics, out, args.expected)
        elif kind == "stock":
            run_main(_stock_flow(shape_, fmt, args.bootstrap, topics, out, t0=first))
        elif "2p" in mode:
            base = [sys.executable, __file__, *sys.argv[1:], "--out", str(out)]
            rss += sum(o["peak_rss_mb"] for o in run_processes(base, name=name))
        elif "w2" in mode:
            cluster_main(
                _thalweg_flow(shape_, fmt, args.bootstrap, topics, out),
                [],
                0,
                worker_count_per_proc=2,
            )
        else:
            lane = "lane" in mode
            flow = _thalweg_flow(shape_, fmt, args.bootstrap, topics, out, lane=lane, t0=first)
            if "long" in mode:  # one epoch for the whole run, however slow the machine
                from datetime import timedelta

                run_main(flow, epoch_interval=timedelta(hours=1))
            else:
                run_main(flow)
        n = _count_rows(out if kind != "thalweg" else out / "orders")
        if n != args.expected:
            msg = f"{name}: Parquet holds {n} records; expected {args.expected}"
            raise SystemExit(msg)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"records": n, "peak_rss_mb": rss or peak_rss_mb(), **_FIRST}


# -- driver ------------------------------------------------------------------------------


def _produce(
    bootstrap: str,
    shape: Shape,
    fmt: str,
    records: int,
    stamp: int,
    factors: tuple[int, ...],
    *,
    partitions: int = 0,
    compression: str = "none",
) -> tuple[dict[int, list[str]], int, int]:
    """For each factor f, ``f * records`` records over the same number of partitions.

    Returns the topics per factor, the records of factor 1 and their bytes. Doubling
    the records per partition (not the partitions) is what tests that memory is flat.
    ``partitions`` (a multiple of 4) spreads them over that many partitions; 0 uses as
    many as the mock's retention needs for uncompressed record batches. ``compression``
    is the producer's ``compression.type``: compressed batches let a partition of the
    mock hold 2-6x the records (it keeps ~5 MB of batches, as stored).
    """
    from thalweg_bytewax.testing import produce

    if partitions < 0 or partitions % 4:
        raise SystemExit(f"--partitions expected a multiple of 4 (topics of 4); got {partitions}")
    if partitions:
        n_topics = partitions // 4
    else:
        per_topic = PER_TOPIC[fmt] // max(factors)  # the largest set must fit the retention
        n_topics = max(1, -(-records // per_topic))
    per_topic = records // n_topics
    config = {"compression.type": compression}
    topics: dict[int, list[str]] = {}
    total_bytes = 0
    for f in factors:
        topics[f] = [f"bench-e2e-{shape.name}-{fmt}-{stamp}-x{f}-{i}" for i in range(n_topics)]
        for t_i, topic in enumerate(topics[f]):
            recs = []
            for i, order in enumerate(shape.orders(per_topic * f, seed=t_i + 1000 * f)):
                value = shape.encode(order, fmt)
                if f == 1:
                    total_bytes += len(value)
                recs.append({"key": shape.key(order), "value": value, "partition": i % 4})
            produce(bootstrap, topic, recs, config=config)
    return topics, per_topic * n_topics, total_bytes


def _run_child(args: list[str], name: str) -> dict[str, float]:
    """Run one variant in a fresh interpreter; wall and CPU over all its processes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, __file__, *args, "--t0", repr(time.time())],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"variant {name} failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    result["seconds"] = wall
    result["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result["sys_s"] = after.ru_stime - before.ru_stime
    return result


KINDS = ("stock", "naive", "thalweg-pure", "thalweg", "thalweg-lane", "thalweg-w2", "thalweg-2p")
FLOOR_KINDS = ("floor-consume", "floor-parts")
"""The floor's parts, each alone (``benchmarks/_floor.py``); ``--kinds`` names them."""
LONG_KINDS = ("thalweg-long",)
"""The thalweg flow with one epoch for the whole run (Bytewax's default is 10 s of wall
time, so a run slowed by a loaded machine closes its files more often)."""
FIRST_KINDS = ("stock-first", "thalweg-first")
"""Start-up: process start to the first record out of the deserialize / decode step."""


def _name(kind: str, fmt: str) -> str:
    base, *mode = kind.split("-")
    return "-".join([base, fmt, *mode])


VARIANTS = tuple(
    _name(k, fmt)
    for fmt in ("avro", "json")
    for k in (*KINDS, *FLOOR_KINDS, *LONG_KINDS, *FIRST_KINDS)
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--bootstrap", default="")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per variant, alternated; the median is kept"
    )
    parser.add_argument("--format", action="append", choices=["avro", "json"])
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES))
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset of KINDS")
    parser.add_argument("--double", action="store_true", help="also run on twice the records")
    parser.add_argument(
        "--partitions",
        type=int,
        default=0,
        help="partitions per size (a multiple of 4); 0: as many as uncompressed batches need",
    )
    parser.add_argument(
        "--compression",
        default="none",
        choices=COMPRESSIONS,
        help="the producer's compression.type",
    )
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--topics", default="", help=argparse.SUPPRESS)
    parser.add_argument("--expected", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--out", default="", help=argparse.SUPPRESS)
    parser.add_argument("--proc-id", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--addresses", default="", help=argparse.SUPPRESS)
    parser.add_argument("--t0", type=float, default=0.0, help=argparse.SUPPRESS)
    return parser


def _measure(
    bootstrap: str, shape: Shape, fmt: str, kinds: list[str], args: argparse.Namespace, stamp: int
) -> dict[str, dict[str, float]]:
    factors = (1, 2) if args.double else (1,)
    t0 = time.perf_counter()
    topics, total, nbytes = _produce(
        bootstrap,
        shape,
        fmt,
        args.records,
        stamp,
        factors,
        partitions=args.partitions,
        compression=args.compression,
    )
    check_retention(bootstrap, [t for ts in topics.values() for t in ts])
    print(
        f"produced {total * sum(factors):,} {shape.name} {fmt} records"
        f" ({nbytes * sum(factors) / 1e6:.1f} MB, {args.compression} batches) to"
        f" {len(topics[1])} topics x 4 partitions"
        f" per size in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    sizes = [(f, topics[f], total * f) for f in factors]
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _ in range(args.repeat):  # alternate the variants so load drifts hit all of them
        for kind in kinds:
            name = _name(kind, fmt)
            for factor, tops, expected in sizes[:1] if kind in FIRST_KINDS else sizes:
                child = ["--child", name, "--shape", shape.name, "--bootstrap", bootstrap]
                child += ["--topics", ",".join(tops), "--expected", str(expected)]
                run = _run_child(child, name)
                runs.setdefault((name, factor), []).append(run)
                # Each run as it ends: a run cut short still leaves what it measured.
                print(json.dumps({"run": name, "factor": factor, **run}), flush=True)
    results: dict[str, dict[str, float]] = {}
    for (name, factor), rs in runs.items():
        wall = median(r["seconds"] for r in rs)
        best = min(rs, key=lambda r: abs(r["seconds"] - wall))
        row = dict(best, bytes=nbytes * factor, cpu_min=min(r["cpu_s"] for r in rs))
        for key in rs[0]:  # each figure's median over the runs (the floor's parts, start-up)
            row[f"med:{key}"] = median(r[key] for r in rs)
        results[f"{shape.name}/{name}" + ("" if factor == 1 else "@2x")] = row
    return results


def _report(results: dict[str, dict[str, float]], double: bool) -> None:
    print(
        f"\n{'shape/variant':<28}{'records':>10}{'records/s':>11}{'x stock':>8}{'CPU us/rec':>11}"
        f"{'x stock':>8}{'RSS MB':>8}"
        + (f"{'RSS 2x':>8}{'marg. us':>9}{'of sys':>8}{'cheapest':>9}" if double else "")
    )
    for key, r in results.items():
        if key.endswith(("@2x", "-first")) or key.split("/")[1].startswith("floor"):
            continue
        shape, name = key.split("/")
        # Without the stock variant in the run (--kinds), the ratios are left out.
        stock = results.get(f"{shape}/stock-{name.split('-')[1]}")
        rps = r["records"] / r["seconds"]
        cpu = r["cpu_s"] / r["records"] * 1e6
        wall_x = f"{stock['seconds'] / r['seconds']:>7.1f}x" if stock else f"{'-':>8}"
        cpu_x = f"{stock['cpu_s'] / r['cpu_s']:>7.1f}x" if stock else f"{'-':>8}"
        line = (
            f"{key:<28}{int(r['records']):>10,}{rps:>11,.0f}"
            f"{wall_x}{cpu:>11.2f}{cpu_x}{r['peak_rss_mb']:>8.0f}"
        )
        if double:
            d = results[key + "@2x"]
            marginal = (d["cpu_s"] - r["cpu_s"]) / (d["records"] - r["records"]) * 1e6
            added = d["records"] - r["records"]
            sys_marginal = (d["sys_s"] - r["sys_s"]) / added * 1e6
            cheapest = (d["cpu_min"] - r["cpu_min"]) / added * 1e6
            line += f"{d['peak_rss_mb']:>8.0f}{marginal:>9.2f}{sys_marginal:>8.2f}{cheapest:>9.2f}"
        print(line)


def _marginal(results: dict[str, dict[str, float]], key: str, figure: str = "cpu_s") -> float:
    """Median-run marginal of ``figure`` per added record, in microseconds."""
    one, two = results[key], results[key + "@2x"]
    added = two["records"] - one["records"]
    return (two[f"med:{figure}"] - one[f"med:{figure}"]) / added * 1e6


def _floor_report(results: dict[str, dict[str, float]]) -> None:
    """The floor's parts per shape and format, their sum, and the flows against it."""
    for key in results:
        shape, name = key.split("/")
        if not name.startswith("floor-") or not name.endswith("-parts"):
            continue
        fmt = name.split("-")[1]
        if f"{shape}/floor-{fmt}-consume@2x" not in results or key + "@2x" not in results:
            continue
        parts = {
            "consume (native batch, fetch + decompression)": _marginal(
                results, f"{shape}/floor-{fmt}-consume"
            )
        }
        figures = [f for f in results[key] if f.startswith("med:") and ":" in f[4:]]
        figures += ["med:ids"]
        for figure in figures:
            parts[figure[4:]] = _marginal(results, key, figure[4:])
        parses = {k: v for k, v in parts.items() if k.startswith("parse:")}
        parse = min(parses, key=parses.__getitem__)
        floor = (
            parts["consume (native batch, fetch + decompression)"]
            + parses[parse]
            + parts["ids"]
            + parts["write:sink's (zstd)"]
        )
        print(f"\nfloor of {shape} {fmt}, marginal CPU us a record (median runs):")
        for part, value in parts.items():
            taken = part in (parse, "ids", "write:sink's (zstd)") or part.startswith("consume")
            print(f"  {part:<52}{value:>7.2f}{'  *' if taken else ''}")
        print(f"  {'floor (the parts marked *)':<52}{floor:>7.2f}")
        for kind in ("thalweg", "naive", "stock", "thalweg-lane"):
            flow = f"{shape}/{_name(kind, fmt)}"
            if flow + "@2x" in results:
                m = _marginal(results, flow)
                print(f"  {kind:<52}{m:>7.2f}  {m / floor:.2f}x floor")


def _startup_report(results: dict[str, dict[str, float]]) -> None:
    """Process start to the first record, stock against thalweg (median / min of runs)."""
    for key, r in results.items():
        if key.endswith("-first") and "med:first_record_s" in r:
            print(
                f"start-up {key:<28} first record after {r['med:first_record_s']:.2f} s,"
                f" {r['med:first_record_cpu_s']:.2f} s of CPU (medians of the runs)"
            )


def _byte_compile() -> None:
    """Compile the project's packages to ``__pycache__``, as installing a wheel does."""
    import compileall

    root = Path(__file__).resolve().parent.parent
    for package in ("thalweg_bytewax", "flows", "benchmarks"):
        if not compileall.compile_dir(root / package, quiet=1):
            raise SystemExit(f"byte-compiling {root / package} failed")


def main() -> None:
    """Run the variants (or, with ``--child``, one of them) and print the table."""
    args = _parser().parse_args()
    if args.child:
        print(json.dumps(run_variant(args)))
        return
    _byte_compile()
    kinds = [k for k in args.kinds.split(",") if k]
    with broker(args.bootstrap) as bootstrap:
        stamp = int(time.time())
        results: dict[str, dict[str, float]] = {}
        for name in args.shape or SHAPES:
            for fmt in args.format or ["avro", "json"]:
                results |= _measure(bootstrap, shape(name), fmt, kinds, args, stamp)
        _report(results, args.double)
        _floor_report(results)
        _startup_report(results)
        print(json.dumps(results))


if __name__ == "__main__":
    main()
