"""Private: the per-record ``produce()`` loop of a ``KafkaSink`` partition.

The one per-record path of the sink (``produce_batch`` carries no headers), kept lean:
arguments positional (each keyword costs a lookup per call), the bound method in a
local, ``poll(0)`` once per chunk rather than a counter per record, and, where records
carry only the locator and the batch's shared headers, one header list reused with only
its first entry replaced (confluent-kafka copies headers into librdkafka during the
call), so no per-record list is built or kept for the garbage collector to walk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer

from thalweg_bytewax import _faults

from ._sink_records import HEADER_LOCATOR, Prepared

__all__ = ["POLL_EVERY", "produce_all"]

POLL_EVERY = 1000
"""Records produced between two ``poll(0)`` calls, which serve delivery reports (a
record's memory is freed only once its report is served)."""

_Headers = list[tuple[str, str | bytes | None]]  # what Producer.produce takes

OnFull = Callable[[tuple[Any, ...]], None]
"""Called with a record's ``produce()`` arguments when the local queue refused it."""


def produce_all(producer: Producer, topic: str, prepared: Prepared, on_full: OnFull) -> None:
    """Hand every record of ``prepared`` to ``producer``, polling once per chunk.

    The chunks are cut after the middle record too, where the ``kafka_sink.mid_epoch``
    fault point of the crash tests sits.

    Args:
        producer: The partition's producer.
        topic: The output topic.
        prepared: One batch's records.
        on_full: Waits for room and produces the record again (``BufferError``).
    """
    n = len(prepared.values)
    half = n // 2
    cuts = sorted({*range(0, n, POLL_EVERY), half + 1, n})
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        _produce(producer, topic, prepared, lo, hi, on_full)
        producer.poll(0)
        if hi == half + 1:
            _faults.checkpoint("kafka_sink.mid_epoch")


def _produce(
    producer: Producer, topic: str, prepared: Prepared, lo: int, hi: int, on_full: OnFull
) -> None:
    produce = producer.produce
    part = prepared.partition
    values = prepared.values[lo:hi]
    keys = prepared.keys[lo:hi]
    locators = prepared.locators[lo:hi]
    # produce(topic, value, key, partition, callback, on_delivery, timestamp, headers)
    if prepared.tails is None:
        reused: _Headers = [(HEADER_LOCATOR, None), *prepared.shared]
        for value, key, loc in zip(values, keys, locators, strict=True):
            reused[0] = (HEADER_LOCATOR, loc)
            try:
                produce(topic, value, key, part, None, None, 0, reused)
            except BufferError:
                on_full((topic, value, key, part, None, None, 0, reused))
        return
    tails = prepared.tails[lo:hi]
    for value, key, loc, tail in zip(values, keys, locators, tails, strict=True):
        headers: _Headers = [(HEADER_LOCATOR, loc), *tail]
        try:
            produce(topic, value, key, part, None, None, 0, headers)
        except BufferError:
            on_full((topic, value, key, part, None, None, 0, headers))
