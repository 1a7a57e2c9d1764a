"""``thalweg dev produce`` speed: columnar sample orders in a tight produce loop.

Baseline in the same run: the per-order path it replaced (a dict per order from
``sample_orders``, fastavro ``encode_order_avro``, ``produce`` with headers and a
delivery callback per record, linger 20 ms). Both against the librdkafka mock cluster in a
separate process; records/s on the wall clock and the producing process's CPU.

    python benchmarks/dev_produce.py --count 100000
"""

from __future__ import annotations

import argparse
import resource
import time
from functools import partial

from confluent_kafka import Producer

from thalweg_bytewax.dev.samples import encode_order_avro, order_key, sample_orders
from thalweg_bytewax.testing import MockCluster, produce_sample_orders


def per_order(bootstrap: str, topic: str, count: int) -> None:
    """The replaced path: one dict, one fastavro call and one callback per order."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    headers: list[tuple[str, str | bytes | None]] = [
        ("content-type", b"application/vnd.confluent.avro"),
        ("producer", b"thalweg-dev"),
    ]
    for i, order in enumerate(sample_orders(count)):
        stamp = int(order["created_at"].timestamp() * 1000)
        while True:
            try:
                p.produce(topic, encode_order_avro(order), order_key(order), headers=headers,
                          on_delivery=lambda err, msg: None, timestamp=stamp)  # fmt: skip
                break
            except BufferError:
                p.poll(0.05)
        if i % 10_000 == 0:
            p.poll(0)
    p.flush(60)


def measure(name: str, run: object, count: int) -> None:
    """Print records/s (wall) and CPU seconds per 100k records of one run."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()  # type: ignore[operator]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{name:<28} {count / wall:>10,.0f} rec/s wall  {cpu / count * 1e5:6.2f} s CPU/100k  "
          f"(peak RSS {rss:,.0f} MB)")  # fmt: skip


def main() -> None:
    """Run both paths against a fresh mock cluster."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n = args.count
    with MockCluster() as cluster:
        b = cluster.bootstrap
        produce_sample_orders(b, "warmup", 1_000)
        for r in range(args.rounds):
            fast, slow = f"fast{r}", f"slow{r}"
            measure("dev produce (columnar)", partial(produce_sample_orders, b, fast, n), n)
            measure("per-order baseline", partial(per_order, b, slow, n), n)


if __name__ == "__main__":
    main()
