"""Private: where a Kafka source partition without resume state starts reading.

``starting_offset`` names the earliest or the latest offset, a time (the first record
at or after it) or an offset; an offset already deleted by retention is refused rather
than silently moved forward.
"""

from __future__ import annotations

from datetime import datetime

from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from thalweg_bytewax.errors import SourceError

from .config import KafkaSourceConfig as SourceConfig

__all__ = ["initial_offset"]


def initial_offset(
    consumer: Consumer, config: SourceConfig, tp: TopicPartition, low: int, high: int
) -> int:
    """The offset a fresh partition starts at, per ``config.starting_offset``.

    Args:
        consumer: A consumer of the partition's cluster (for a lookup by time).
        config: The source's settings.
        tp: The topic-partition.
        low: Its earliest offset.
        high: Its end offset.

    Returns:
        The first offset to read.

    Raises:
        SourceError: The starting offset was already deleted.
    """
    start = config.starting_offset
    if start == "earliest":
        return low
    if start == "latest":
        return high
    if isinstance(start, datetime):
        ms = int(start.timestamp() * 1000)
        found = consumer.offsets_for_times(
            [TopicPartition(tp.topic, tp.partition, ms)], timeout=config.metadata_timeout_s
        )[0]
        return high if found.offset in (OFFSET_END, -1) else found.offset
    if start < low:
        msg = (
            f"kafka source: starting offset {start} of `{tp.topic}:{tp.partition}` was "
            f"already deleted (earliest available is {low}); choose an offset >= {low}"
        )
        raise SourceError(msg)
    return int(start)
