"""Helpers for testing flows against real components: a local Kafka broker and producers.

:class:`MockCluster` starts librdkafka's mock cluster — a real Kafka wire-protocol
broker implemented inside librdkafka, reached over TCP — in a separate process, so it
outlives any one client and can be shared by subprocess flows. Topics auto-create with
4 partitions on first produce; the mock keeps only about 5 MB per partition.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from confluent_kafka import Producer

from thalweg_bytewax.config import UNSET, Unset, duration_keyword
from thalweg_bytewax.errors import SourceError

__all__ = ["MockCluster", "produce", "produce_sample_orders"]


class MockCluster:
    """A librdkafka mock Kafka cluster running in a child process.

    Use as a context manager::

        with MockCluster() as cluster:
            print(cluster.bootstrap)

    Args:
        brokers: Number of mock brokers.
        start_timeout: How long to wait for the broker to report its address (default
            30 s).
        start_timeout_s: Deprecated: ``start_timeout`` in seconds.

    Raises:
        ConfigError: When the wait is no positive ``timedelta``, or given under both
            names.
    """

    def __init__(
        self,
        brokers: int = 1,
        *,
        start_timeout: timedelta | Unset = UNSET,
        start_timeout_s: float | Unset = UNSET,
    ) -> None:
        self._brokers = brokers
        self._timeout = duration_keyword(
            "MockCluster",
            "start_timeout",
            start_timeout,
            "start_timeout_s",
            start_timeout_s,
            default=timedelta(seconds=30),
        )
        self._proc: subprocess.Popen[str] | None = None
        self.bootstrap: str = ""

    def start(self) -> MockCluster:
        """Start the broker process and wait for its bootstrap address."""
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "thalweg_bytewax.dev._mock_broker",
                "--brokers",
                str(self._brokers),
                "--wait-stdin",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self._proc.stdout is not None
        deadline = time.monotonic() + self._timeout
        line = self._proc.stdout.readline()
        if not line.startswith("BOOTSTRAP ") or time.monotonic() > deadline:
            self.stop()
            msg = f"mock cluster: expected a `BOOTSTRAP host:port` line; got {line!r}"
            raise SourceError(msg)
        self.bootstrap = line.split(" ", 1)[1].strip()
        return self

    def stop(self) -> None:
        """Stop the broker process (its data is gone with it)."""
        if self._proc is None:
            return
        try:
            if self._proc.stdin:
                self._proc.stdin.close()
            self._proc.terminate()
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._proc = None

    def __enter__(self) -> MockCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[dict[str, Any]],
    *,
    config: dict[str, Any] | None = None,
) -> int:
    """Produce records (dicts of ``Producer.produce`` keyword arguments) and flush.

    Returns:
        The number of records produced.

    Raises:
        SourceError: When a delivery fails or the flush times out.
    """
    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "message.max.bytes": 4 * 1024 * 1024,
            **(config or {}),
        }
    )
    count = 0
    for rec in records:
        while True:
            try:
                producer.produce(topic, on_delivery=on_delivery, **rec)
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
    _flush_or_raise(producer, topic, failures)
    return count


# Measured on 2 shared cores (docs/benchmarks.md "dev produce"): 10,000-order chunks
# keep the columnar encoder's numpy work amortised and the producer queue fed; a large
# linger and batch let librdkafka build big requests; delivery reports only for errors
# keep the Python callback off the per-record path; no headers (each costs a conversion).
_PRODUCE_CHUNK = 10_000
_FAST_PRODUCER = {
    "linger.ms": 100,
    "batch.num.messages": 10_000,
    "batch.size": 4 * 1024 * 1024,
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 512 * 1024,
    "compression.type": "lz4",
    "delivery.report.only.error": True,
}


def _flush_or_raise(producer: Producer, topic: str, failures: list[str]) -> None:
    """Flush ``producer`` (up to 60 s); raise if records are left or deliveries failed."""
    remaining = producer.flush(60)
    if remaining or failures:
        msg = (
            f"producer to `{topic}`: {remaining} records not flushed, "
            f"{len(failures)} failed (first: {failures[:1]})"
        )
        raise SourceError(msg)


def _send(
    producer: Producer, topic: str, value: bytes, key: bytes, stamp: int, partition: int | None
) -> None:
    """Produce one record, waiting while librdkafka's queue is full."""
    while True:
        try:
            if partition is None:
                producer.produce(topic, value, key, timestamp=stamp)
            else:
                producer.produce(topic, value, key, partition, timestamp=stamp)
        except BufferError:
            producer.poll(0.05)  # the queue is full: let librdkafka drain it
            continue
        return


def produce_sample_orders(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    seed: int = 7,
    partitions: Sequence[int] | None = None,
    start: int = 0,
    compression: str = "lz4",
) -> int:
    """Produce ``count`` sample orders as Confluent-framed Avro, keyed by customer id.

    The orders are the embedded sample's (:func:`thalweg_bytewax.dev.samples.sample_orders_at`):
    order ``i`` is created ``i`` x 100 ms after 2026-01-01 give or take two seconds, and
    that is its CreateTime, so a flow's one-minute event-time windows see them in order.
    Encoded columnar in chunks and produced in a tight loop (over 100,000 orders a
    second; docs/benchmarks.md). No headers: the Confluent frame names the schema, and
    headers cost librdkafka a conversion per record (~40 % of the produce time).

    Args:
        bootstrap: Broker address list.
        topic: Target topic.
        count: Number of orders.
        seed: Sample seed (same seed, same orders).
        partitions: Spread orders round-robin over these partitions (default: by key).
        start: The first order number (continue an earlier run with ``start=count``).
        compression: The producer's ``compression.type`` (``zstd`` packs ~1.4x the
            orders of ``lz4`` into a partition of a broker that keeps bytes).

    Returns:
        The number of orders produced.

    Raises:
        SourceError: When a delivery fails or the final flush times out.
    """
    from thalweg_bytewax.dev.samples import sample_orders_at  # noqa: PLC0415 - numpy, on use

    failures: list[str] = []

    def on_error(err: Any, _msg: Any) -> None:  # called for failed deliveries only
        if err is not None:
            failures.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            **_FAST_PRODUCER,
            "compression.type": compression,
            "on_delivery": on_error,
        }
    )
    send = producer.produce
    for first in range(start, start + count, _PRODUCE_CHUNK):
        indexes = range(first, min(first + _PRODUCE_CHUNK, start + count))
        values, keys, stamps = sample_orders_at(indexes, seed=seed)
        if partitions:
            for j, i in enumerate(indexes):
                part = partitions[i % len(partitions)]
                _send(producer, topic, values[j], keys[j], stamps[j], part)
        else:
            for j, value in enumerate(values):
                try:  # the tight loop: no callback, no per-record allocation but the call
                    send(topic, value, keys[j], timestamp=stamps[j])
                except BufferError:
                    _send(producer, topic, value, keys[j], stamps[j], None)
        producer.poll(0)
    _flush_or_raise(producer, topic, failures)
    return count
