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
  ``AvroCodec`` over a schema directory / ``JsonCodec`` over a JSON Schema.

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


def _stock_sink(out: Path):  # type: ignore[no-untyped-def]
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
                table = pa.Table.from_pylist(self.rows)
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
    op.output("parquet", dicts, _stock_sink(out))
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


def run_variant(name: str, bootstrap: str, topics: list[str], expected: int) -> dict[str, float]:
    from bytewax.testing import run_main

    kind, fmt = name.split("-")
    out = Path(tempfile.mkdtemp(prefix=f"twg-bench-{name}-"))
    try:
        build = _stock_flow if kind == "stock" else _thalweg_flow
        flow = build(fmt, bootstrap, topics, out)
        t0 = time.perf_counter()
        run_main(flow)
        elapsed = time.perf_counter() - t0
        n = _count_rows(out if kind == "stock" else out / "orders")
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


VARIANTS = ("stock-avro", "thalweg-avro", "stock-json", "thalweg-json")


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
            for kind in ("stock", "thalweg"):
                name = f"{kind}-{fmt}"
                runs = [_run_child(name, bootstrap, topics, total) for _ in range(args.repeat)]
                best = min(runs, key=lambda r: r["seconds"])
                best["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
                best["bytes"] = nbytes
                results[name] = best

        print(f"\n{'variant':<14}{'records':>10}{'records/s':>12}{'MB/s':>8}{'peak RSS MB':>13}")
        for name, r in results.items():
            rps = r["records"] / r["seconds"]
            mbps = r["bytes"] / r["seconds"] / 1e6
            print(
                f"{name:<14}{int(r['records']):>10,}{rps:>12,.0f}{mbps:>8.1f}"
                f"{r['peak_rss_mb']:>13.0f}"
            )
        print()
        for fmt in args.format or ["avro", "json"]:
            ours, stock = results[f"thalweg-{fmt}"], results[f"stock-{fmt}"]
            ratio = stock["seconds"] / ours["seconds"]
            print(f"{fmt}: thalweg / stock = {ratio:.1f}x (target >= 4x)")
        print(json.dumps(results))


if __name__ == "__main__":
    main()
