"""Kafka sink benchmark: KafkaSink with AvroEncoder against a per-row AvroSerializer loop.

Both variants produce the same generated orders (8 payload columns plus the locator
columns, 10k-row batches) as Confluent-framed Avro to a fresh topic:

* ``serializer`` — a competent user's baseline: confluent-kafka's ``AvroSerializer``
  per row (rows from ``to_pylist()``) + ``produce()`` + ``poll(0)``, ``flush()`` per epoch;
* ``sink`` — a ``KafkaSink`` partition with ``AvroEncoder``: ``write_batch`` per batch,
  ``snapshot()`` (flush + delivery check) per epoch, a locator header on every record;
* ``sink2x`` — the sink with twice the epochs, to check that peak RSS stays flat
  (bounded by the producer queue, not by the data: each epoch is generated untimed just
  before it is produced and dropped after).

Each variant runs in its own process against the same broker (a mock cluster unless
``--bootstrap`` names one); registry ``mock://``. Prints rows/s, MB/s (Avro bytes), the
client's CPU time per row (the child process: Python and librdkafka's threads, not the
broker) and peak RSS; ``--repeat N`` runs the variants N times interleaved and prints
the medians (the largest peak RSS)::

    .venv/bin/python benchmarks/kafka_sink.py --epochs 5 --rows-per-epoch 40000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import broker, peak_rss_mb, run_child  # noqa: E402

BATCH_ROWS = 10_000
SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "customer_id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "quantity", "type": "int"},
        {"name": "currency", "type": "string"},
        {"name": "status", "type": "string"},
        {"name": "note", "type": ["null", "string"]},
        {"name": "paid", "type": "boolean"},
    ],
}


def batches(epoch: int, rows: int) -> Iterator[pa.RecordBatch]:
    rng = np.random.default_rng(epoch)
    for start in range(0, rows, BATCH_ROWS):
        n = min(BATCH_ROWS, rows - start)
        base = epoch * rows + start
        offsets = np.arange(base, base + n, dtype=np.int64)
        yield pa.RecordBatch.from_pydict(
            {
                "order_id": pa.array([f"o-{i}" for i in offsets.tolist()]),
                "customer_id": pa.array(rng.integers(0, 100_000, n), pa.int64()),
                "amount": pa.array(rng.random(n) * 500),
                "quantity": pa.array(rng.integers(1, 10, n), pa.int32()),
                "currency": pa.array(["EUR", "USD"] * (n // 2) + ["EUR"] * (n % 2)),
                "status": pa.array(["placed"] * n),
                "note": pa.array([None if i % 3 else "gift" for i in range(n)], pa.string()),
                "paid": pa.array(rng.random(n) > 0.5),
                "_twg_source_topic": pa.array(["orders"] * n),
                "_twg_source_partition": pa.array([0] * n, pa.int32()),
                "_twg_source_offset": pa.array(offsets),
            }
        )


class _Clock:
    """Wall and CPU time summed over the timed sections only."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self._t = self._c = 0.0

    def start(self) -> None:
        self._t, self._c = time.perf_counter(), time.process_time()

    def stop(self) -> None:
        self.wall += time.perf_counter() - self._t
        self.cpu += time.process_time() - self._c


def child(variant: str, bootstrap: str, epochs: int, rows: int) -> None:
    """Run one variant; only producing and flushing is timed.

    Imports, setup and the generation of each epoch's batches are not timed; each epoch
    is generated just before it is produced and dropped after, so peak RSS shows what
    the producer holds rather than the input.
    """
    topic = f"bench-{variant}-{uuid.uuid4().hex[:6]}"
    clock = _Clock()
    payload_bytes = 0
    if variant == "serializer":
        from confluent_kafka import Producer
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        registry = SchemaRegistryClient.new_client({"url": "mock://bench"})
        serializer = AvroSerializer(registry, json.dumps(SCHEMA))
        ctx = SerializationContext(topic, MessageField.VALUE)
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        producer.list_topics(topic, timeout=10)
        fields = [f["name"] for f in SCHEMA["fields"]]
        for e in range(epochs):
            data = list(batches(e, rows))
            clock.start()
            for batch in data:
                for row in batch.select(fields).to_pylist():
                    value = serializer(row, ctx)
                    payload_bytes += len(value)
                    while True:
                        try:
                            producer.produce(topic, value=value)
                            break
                        except BufferError:
                            producer.poll(0.01)
                    producer.poll(0)
            if producer.flush(60):
                raise SystemExit("flush timed out")
            clock.stop()
    else:
        from thalweg_bytewax.codecs import AvroEncoder
        from thalweg_bytewax.connectors.kafka import KafkaSink

        encoder = AvroEncoder("mock://bench", schema=SCHEMA, auto_register=True)
        sink = KafkaSink([bootstrap], topic, encoder=encoder, shards=1)
        part = sink.build_part("bench.out", "shard-000", None)
        for e in range(epochs):
            data = list(batches(e, rows))
            clock.start()
            for batch in data:
                part.write_batch([batch])
            part.snapshot()
            clock.stop()
        payload_bytes = part.stats.bytes_produced
        part.close()
    total = epochs * rows
    print(
        json.dumps(
            {
                "rows_per_s": total / clock.wall,
                "mb_per_s": payload_bytes / clock.wall / 1e6,
                "seconds": clock.wall,
                "cpu_us_per_row": clock.cpu / total * 1e6,
                "rows": total,
                "peak_rss_mb": peak_rss_mb(),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--rows-per-epoch", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=1, help="runs per variant (median)")
    parser.add_argument("--bootstrap", default="", help="a real cluster (default: mock)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        variant, bootstrap, epochs, rows = args.child
        child(variant, bootstrap, int(epochs), int(rows))
        return
    variants = (
        ("serializer", "serializer", args.epochs),
        ("sink", "sink", args.epochs),
        ("sink2x", "sink", 2 * args.epochs),
    )
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in variants}
    with broker(args.bootstrap) as bootstrap:
        for _ in range(args.repeat):  # interleaved, so load on the machine hits all alike
            for name, variant, epochs in variants:
                runs[name].append(
                    run_child(
                        __file__,
                        ["--child", variant, bootstrap, str(epochs), str(args.rows_per_epoch)],
                        name=name,
                    )
                )
    results = {
        name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} | {
            "peak_rss_mb": max(r["peak_rss_mb"] for r in rs)
        }
        for name, rs in runs.items()
    }
    for name, r in results.items():
        print(
            f"{name:>10}: {r['rows_per_s']:>10,.0f} rows/s  {r['mb_per_s']:6.1f} MB/s  "
            f"{r['cpu_us_per_row']:5.2f} CPU µs/row  {r['rows']:>8,.0f} rows  "
            f"peak RSS {r['peak_rss_mb']:6.0f} MB"
        )
    sink, base = results["sink"], results["serializer"]
    print(
        f"KafkaSink + AvroEncoder vs per-row AvroSerializer + produce(): "
        f"{sink['rows_per_s'] / base['rows_per_s']:.1f}x rows/s, "
        f"{base['cpu_us_per_row'] / sink['cpu_us_per_row']:.1f}x less CPU per row"
        + (f" (median of {args.repeat})" if args.repeat > 1 else "")
    )


if __name__ == "__main__":
    main()
