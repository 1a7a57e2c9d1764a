"""CPU of the consume call alone: the native batch consume against confluent-kafka's.

Fills four partitions of a local broker with N plain orders (JSON or Confluent-framed
Avro values, producer ``compression.type`` as given), then reads them all, in turn A B
A B, with:

* ``confluent`` — one ``Consumer`` assigned the four partitions, ``consume(10_000)``
  in a loop, reading every message's value, key, offset, timestamp and headers (what
  any Python consumer pays per message before it builds anything);
* ``native`` — one ``thalweg_bytewax._kafka_native`` client with a consumer a
  partition, ``consume(10_000, 16 MiB)`` in a loop (the Arrow buffers of a RawBatch;
  the RawBatch itself is not built).

Each figure is the **thread CPU** of the reading thread inside its consume calls
(``time.thread_time``), per record: librdkafka's fetch threads, which both pay
alike, are left out, and so is waiting for the fetchers (the loop sleeps between
empty calls). Both read with the settings the Kafka source uses. Min and median of the
repeats.

Usage::

    python benchmarks/consume_cpu.py --records 200000 --format json --repeat 5
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import time
from collections.abc import Callable
from statistics import median
from typing import Any

from _decode_shapes import shape  # noqa: E402
from _harness import broker  # noqa: E402

PARTITIONS = 4
POLL = 10_000


def _fill(bootstrap: str, topic: str, records: int, fmt: str, compression: str) -> None:
    from thalweg_bytewax.testing import produce

    plain = shape("plain")
    recs = [
        {"key": plain.key(o), "value": plain.encode(o, fmt), "partition": i % PARTITIONS}
        for i, o in enumerate(plain.orders(records, seed=1))
    ]
    produce(bootstrap, topic, recs, config={"compression.type": compression})


def _settings(bootstrap: str) -> dict[str, Any]:
    from thalweg_bytewax.connectors.kafka._config import consumer_config

    return consumer_config([bootstrap], None)


def _read_confluent(bootstrap: str, topic: str, records: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(_settings(bootstrap))
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got, cpu = 0, 0.0
    deadline = time.monotonic() + 120
    try:
        while got < records and time.monotonic() < deadline:
            t0 = time.thread_time()
            msgs = c.consume(POLL, timeout=0)
            for m in msgs:
                if m.error() is None:
                    m.value(), m.key(), m.offset(), m.timestamp(), m.headers()
                    got += 1
            cpu += time.thread_time() - t0
            if not msgs:
                time.sleep(0.002)
    finally:
        c.close()
    if got != records:
        raise SystemExit(f"confluent: read {got} of {records} records")
    return cpu


def _read_native(bootstrap: str, topic: str, records: int) -> float:
    from thalweg_bytewax.connectors.kafka._native import _load, native_settings

    module, why = _load()
    if module is None:
        raise SystemExit(f"the native consume cannot run: {why}")
    client = module.Client(native_settings(_settings(bootstrap)))
    consumers = []
    for p in range(PARTITIONS):
        c = module.Consumer(client)
        c.assign(topic, p, 0, -1)
        consumers.append(c)
    got, cpu = 0, 0.0
    deadline = time.monotonic() + 120
    try:
        while got < records and time.monotonic() < deadline:
            before = got
            for c in consumers:
                t0 = time.thread_time()
                got += c.consume(POLL, 16 << 20)[0]
                cpu += time.thread_time() - t0
            if got == before:
                time.sleep(0.002)
    finally:
        for c in consumers:
            c.close()
    if got != records:
        raise SystemExit(f"native: read {got} of {records} records")
    return cpu


VARIANTS: dict[str, Callable[[str, str, int], float]] = {
    "confluent": _read_confluent,
    "native": _read_native,
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--format", choices=["json", "avro"], default="json")
    p.add_argument("--compression", default="zstd", help="the producer's compression.type")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--bootstrap", default="")
    args = p.parse_args()
    with broker(args.bootstrap) as bootstrap:
        topic = f"bench-consume-{args.format}-{time.time_ns()}"
        _fill(bootstrap, topic, args.records, args.format, args.compression)
        cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for _ in range(args.repeat):
            for name, read in VARIANTS.items():
                cpu[name].append(read(bootstrap, topic, args.records) / args.records * 1e6)
    print(f"\n{args.records:,} plain {args.format} orders, {args.compression} batches")
    print(f"{'variant':<12}{'min us/rec':>12}{'median':>10}")
    for name, runs in cpu.items():
        print(f"{name:<12}{min(runs):>12.3f}{median(runs):>10.3f}")


if __name__ == "__main__":
    main()
