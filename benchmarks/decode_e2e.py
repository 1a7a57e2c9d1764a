"""End to end: Kafka -> decode -> Parquet, Bytewax's stock connector against thalweg's.

Produces N sample orders twice — Confluent-framed Avro and JSON (orjson of the same
orders; decimals as strings, datetimes as ISO 8601) — to a local broker, then times,
each in its own process so peak RSS is per variant (one Bytewax worker each):

* ``stock-avro`` / ``stock-json`` — what a user of stock Bytewax writes:
  ``bytewax.connectors.kafka.KafkaSource`` (one item per message), a ``map`` that
  deserializes each message into a dict (fastavro ``schemaless_reader`` after the
  5-byte Confluent prefix / ``orjson.loads``), and a sink that buffers dicts and writes
  a Parquet file per 10k rows with ``pa.Table.from_pylist`` + ``pq.write_table``;
* ``thalweg-avro`` / ``thalweg-json`` — ``KafkaSource -> decode -> ParquetSink``
  (decoded lane with the locator columns, DLQ to its own ParquetSink), with
  ``AvroCodec`` over a schema directory / ``JsonCodec`` over a JSON Schema, reading
  with the native batch consume when it is built;
* ``thalweg-avro-pure`` / ``thalweg-json-pure`` — the same through confluent-kafka's
  ``Message`` objects (``THALWEG_KAFKA_CONSUME=pure``);
* ``naive-avro`` / ``naive-json`` — a script without Bytewax: one ``Consumer`` on every
  partition, ``consume()`` in a loop, the values of each 10k decoded at once
  (``pyarrow.json.read_json`` with the explicit schema / fastavro per value into
  ``from_pylist`` with the explicit schema) and written with ``pq.write_table``.

The stock sink and the naive script get the Arrow schema explicitly (taken once from
decoded sample orders), as a competent user would write them.

Both read every partition from the start and stop at its end (``tail=False``); the
time includes start-up, the broker fetches and the durable Parquet files. Usage::

    python benchmarks/decode_e2e.py --records 200000

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
from typing import Any

from _harness import broker, check_retention, peak_rss_mb, run_child  # noqa: E402

# Per topic (4 partitions), under the mock broker's ~5 MB per partition retention:
# Avro orders are ~130 bytes, JSON orders ~405 bytes.
PER_TOPIC = {"avro": 60_000, "json": 32_000}
STOCK_ROWS_PER_FILE = 10_000


def _count_rows(path: Path) -> int:
    import pyarrow.dataset as ds

    return ds.dataset(path, format="parquet").count_rows()


# -- variants (run in a child process) ---------------------------------------------------


def _arrow_schema(fmt: str):  # type: ignore[no-untyped-def]
    """The orders' Arrow schema, derived once from sample orders decoded like the variant."""
    import orjson
    import pyarrow as pa

    from thalweg_bytewax.samples import sample_orders

    rows = []
    for order in sample_orders(50, seed=99):
        if fmt == "json":  # decimals and datetimes arrive as strings
            rows.append(orjson.loads(orjson.dumps(order, default=str)))
        else:
            row = dict(order)
            row["order_id"] = str(row["order_id"])
            rows.append(row)
    return pa.Table.from_pylist(rows).schema


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


def _stock_flow(fmt: str, bootstrap: str, topics: list[str], out: Path):  # type: ignore[no-untyped-def]
    import io

    import bytewax.operators as op
    import fastavro
    import orjson
    from bytewax.connectors.kafka import KafkaSource
    from bytewax.dataflow import Dataflow

    from thalweg_bytewax.samples import ORDER_AVRO_SCHEMA

    parsed = fastavro.parse_schema(ORDER_AVRO_SCHEMA)

    def from_avro(msg: Any) -> dict[str, Any]:
        rec = fastavro.schemaless_reader(io.BytesIO(msg.value[5:]), parsed, None)
        rec["order_id"] = str(rec["order_id"])  # from_pylist cannot take uuid.UUID
        return rec  # type: ignore[no-any-return]

    def from_json(msg: Any) -> dict[str, Any]:
        return orjson.loads(msg.value)  # type: ignore[no-any-return]

    flow = Dataflow("stock_decode")
    msgs = op.input("in", flow, KafkaSource([bootstrap], topics, tail=False))
    dicts = op.map("deserialize", msgs, from_avro if fmt == "avro" else from_json)
    op.output("parquet", dicts, _stock_sink(out, _arrow_schema(fmt)))
    return flow


def _thalweg_flow(fmt: str, bootstrap: str, topics: list[str], out: Path):  # type: ignore[no-untyped-def]
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow

    import thalweg_bytewax.operators as twg
    from thalweg_bytewax.codecs import AvroCodec, JsonCodec
    from thalweg_bytewax.connectors.kafka import KafkaSource
    from thalweg_bytewax.connectors.parquet import ParquetSink
    from thalweg_bytewax.registry import DirectorySchemaSource
    from thalweg_bytewax.samples import ORDER_JSON_SCHEMA

    if fmt == "avro":
        schemas = Path(__file__).resolve().parents[1] / "flows" / "schemas"
        codec: Any = AvroCodec(DirectorySchemaSource(schemas))
    else:
        codec = JsonCodec(ORDER_JSON_SCHEMA)
    flow = Dataflow("thalweg_decode")
    raw = op.input("in", flow, KafkaSource([bootstrap], topics, tail=False))
    decoded = twg.decode("decode", raw, codec)
    op.output("orders", decoded.ok, ParquetSink(out / "orders"))
    op.output("dlq", decoded.rejected, ParquetSink(out / "dlq"))
    return flow


def _naive(fmt: str, bootstrap: str, topics: list[str], out: Path, expected: int) -> None:
    import io

    import fastavro
    import pyarrow as pa
    import pyarrow.json as pj
    import pyarrow.parquet as pq
    from confluent_kafka import Consumer, TopicPartition

    from thalweg_bytewax.connectors.kafka._config import consumer_config
    from thalweg_bytewax.samples import ORDER_AVRO_SCHEMA

    schema = _arrow_schema(fmt)
    parsed = fastavro.parse_schema(ORDER_AVRO_SCHEMA)
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


def run_variant(name: str, bootstrap: str, topics: list[str], expected: int) -> dict[str, float]:
    from bytewax.testing import run_main

    kind, fmt, *pure = name.split("-")
    if pure:
        os.environ["THALWEG_KAFKA_CONSUME"] = "pure"
    out = Path(tempfile.mkdtemp(prefix=f"twg-bench-{name}-"))
    try:
        t0 = time.perf_counter()
        if kind == "naive":
            _naive(fmt, bootstrap, topics, out, expected)
        else:
            build = _stock_flow if kind == "stock" else _thalweg_flow
            run_main(build(fmt, bootstrap, topics, out))
        elapsed = time.perf_counter() - t0
        n = _count_rows(out if kind != "thalweg" else out / "orders")
        if n != expected:
            msg = f"{name}: Parquet holds {n} records; expected {expected}"
            raise SystemExit(msg)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"records": n, "seconds": elapsed}


# -- driver ------------------------------------------------------------------------------


def _produce(bootstrap: str, fmt: str, records: int, stamp: int) -> tuple[list[str], int, int]:
    import orjson

    from thalweg_bytewax.samples import encode_order_avro, order_key, sample_orders
    from thalweg_bytewax.testing import produce

    per_topic = PER_TOPIC[fmt]
    n_topics = max(1, -(-records // per_topic))
    per_topic = records // n_topics
    topics = [f"bench-e2e-{fmt}-{stamp}-{i}" for i in range(n_topics)]
    total_bytes = 0
    for t_i, topic in enumerate(topics):
        recs = []
        for i, order in enumerate(sample_orders(per_topic, seed=t_i)):
            value = (
                encode_order_avro(order)
                if fmt == "avro"
                else orjson.dumps(order, default=str)  # Decimal -> "12.34"
            )
            total_bytes += len(value)
            recs.append({"key": order_key(order), "value": value, "partition": i % 4})
        produce(bootstrap, topic, recs)
    return topics, per_topic * n_topics, total_bytes


def _run_child(name: str, bootstrap: str, topics: list[str], expected: int) -> dict[str, float]:
    args = ["--child", name, "--bootstrap", bootstrap, "--topics", ",".join(topics)]
    return run_child(__file__, [*args, "--expected", str(expected)], name=name)


KINDS = ("stock", "naive", "thalweg-pure", "thalweg")
VARIANTS = tuple(
    f"{k.split('-')[0]}-{fmt}{'-pure' if k.endswith('-pure') else ''}"
    for fmt in ("avro", "json")
    for k in KINDS
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--repeat", type=int, default=5, help="runs per variant; the best is kept")
    parser.add_argument("--format", action="append", choices=["avro", "json"])
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--topics", default="", help=argparse.SUPPRESS)
    parser.add_argument("--expected", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        result = run_variant(args.child, args.bootstrap, args.topics.split(","), args.expected)
        result["peak_rss_mb"] = peak_rss_mb()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        result["cpu_s"] = usage.ru_utime + usage.ru_stime
        print(json.dumps(result))
        return

    with broker(args.bootstrap) as bootstrap:
        stamp = int(time.time())
        results: dict[str, dict[str, float]] = {}
        for fmt in args.format or ["avro", "json"]:
            t0 = time.perf_counter()
            topics, total, nbytes = _produce(bootstrap, fmt, args.records, stamp)
            check_retention(bootstrap, topics)
            took = time.perf_counter() - t0
            print(
                f"produced {total:,} {fmt} orders ({nbytes / 1e6:.1f} MB) to "
                f"{len(topics)} topics x 4 partitions in {took:.1f} s",
                flush=True,
            )
            for kind in KINDS:
                base, *pure = kind.split("-")
                name = f"{base}-{fmt}{'-pure' if pure else ''}"
                runs = [_run_child(name, bootstrap, topics, total) for _ in range(args.repeat)]
                best = min(runs, key=lambda r: r["seconds"])
                best["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
                best["bytes"] = nbytes
                results[name] = best

        print(
            f"\n{'variant':<19}{'records':>10}{'records/s':>12}{'MB/s':>8}"
            f"{'CPU us/rec':>12}{'peak RSS MB':>13}"
        )
        for name, r in results.items():
            rps = r["records"] / r["seconds"]
            mbps = r["bytes"] / r["seconds"] / 1e6
            cpu = r["cpu_s"] / r["records"] * 1e6
            print(
                f"{name:<19}{int(r['records']):>10,}{rps:>12,.0f}{mbps:>8.1f}{cpu:>12.2f}"
                f"{r['peak_rss_mb']:>13.0f}"
            )
        print()
        for fmt in args.format or ["avro", "json"]:
            stock = results[f"stock-{fmt}"]
            for name in (f"naive-{fmt}", f"thalweg-{fmt}-pure", f"thalweg-{fmt}"):
                ratio = stock["seconds"] / results[name]["seconds"]
                print(f"{fmt}: {name} / stock = {ratio:.1f}x (target: thalweg >= 6x)")
        print(json.dumps(results))


if __name__ == "__main__":
    main()
