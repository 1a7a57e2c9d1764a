"""Helpers of the KafkaSink tests: read a topic back with a plain consumer."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from tests.fixtures.kafka import wait_for_offsets
from thalweg_bytewax.connectors.kafka.sink import HEADER_LOCATOR, Locator, parse_locator


@dataclass
class Out:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]

    def header(self, name: str) -> bytes | None:
        return next((v for k, v in self.headers if k == name), None)

    @property
    def packed(self) -> Locator:
        assert self.headers and self.headers[0][0] == HEADER_LOCATOR  # always the first
        loc = parse_locator(self.headers[0][1])
        assert loc is not None
        return loc

    @property
    def locator(self) -> tuple[str, int, int]:
        loc = self.packed
        return loc.topic, loc.partition, loc.offset

    @property
    def record_id(self) -> bytes | None:
        return self.packed.record_id


def read_topic(
    bootstrap: str, topic: str, *, isolation: str = "read_uncommitted", timeout: float = 30
) -> list[Out]:
    """Every record of ``topic`` (all partitions, earliest to end), as a plain consumer sees it."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            # The end of a partition is known from a fetch that finds nothing more, which
            # the broker holds for up to this long (500 ms by default) waiting for data.
            "fetch.wait.max.ms": 10,
            "log_level": 3,
        }
    )
    try:
        md = consumer.list_topics(topic, timeout=10)
        parts = sorted(md.topics[topic].partitions) if topic in md.topics else []
        # A partition whose leader has just changed answers NOT_LEADER for a moment.
        wait_for_offsets(
            bootstrap, topic, parts, deadline=time.monotonic() + timeout, consumer=consumer
        )
        todo = set()
        assign = []
        for p in parts:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > low:
                todo.add(p)
                assign.append(TopicPartition(topic, p, low))
        out: list[Out] = []
        if not assign:
            return out
        consumer.assign(assign)
        deadline = time.monotonic() + timeout
        while todo and time.monotonic() < deadline:
            # `consume` returns when it holds 10,000 messages or its timeout passed: a
            # short timeout ends the read as soon as the last partition's EOF is in.
            for m in consumer.consume(10_000, timeout=0.01):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        todo.discard(m.partition())
                    continue
                headers: Any = m.headers() or []
                out.append(Out(m.partition() or 0, m.offset() or 0, m.key(), m.value(), headers))
        assert not todo, f"partitions {todo} not read to the end in {timeout} s"
        return out
    finally:
        consumer.close()
