"""Private: a transactional ``KafkaSink``'s read-back beyond the last stable offset.

A ``read_committed`` consumer sees a partition only up to its last stable offset (LSO):
the first offset of the oldest transaction still open in it. Shards share output
partitions, so a killed run can leave *another* shard's transaction open below records
this shard committed later; the LSO then stops there until that transaction is aborted
(by ``init_transactions`` when that shard is built again, or by the broker once the
transaction's ``transaction.timeout.ms`` has passed). A read-back that stopped at the
LSO would miss this shard's committed records and write them again.

So each shard, right after its own ``init_transactions``, notes every output
partition's *mark*: its end as ``read_uncommitted`` sees it. Everything the previous
run wrote lies below the mark. When the committed read-back ends below the mark, the
part it could not see yet, ``[position, mark)``, is read with ``read_uncommitted``
(:func:`last_own_offset`); if it holds none of this shard's records the read-back is
complete, otherwise it goes on until the committed position passes the last of them.

Why this wait never waits for the current run: the records it waits behind were
written by this shard's previous producer, which is dead or fenced by the shard's own
``init_transactions`` before the mark was taken. Every transaction that starts below
them was therefore opened before this run started, never by a shard of this run
(whose transaction commits only when the epoch closes, which a shard blocked in its
read-back would hold up: the deadlock). A transaction of this run that opened before
the mark was taken (a shard without state is built when its first record arrives,
possibly after other shards began the epoch) lies above the previous run's records,
so it is never waited for; neither is anything opened after the mark.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from thalweg_bytewax.errors import SinkTerminalError, SinkTransientError
from thalweg_bytewax.runtime.parts import encode_part

from ._errors import is_fatal
from ._sink_records import HEADER_LOCATOR, Locator, parse_locator

__all__ = ["BROKER_ABORT_CHECK_S", "last_own_offset", "uncommitted_config"]

BROKER_ABORT_CHECK_S = 10.0
"""How often a broker looks for transactions past their timeout to abort them
(``transaction.abort.timed.out.transaction.cleanup.interval.ms``, 10 s by default)."""

_BATCH = 10_000


def uncommitted_config(reader_config: dict[str, Any]) -> dict[str, Any]:
    """The read-back consumer's settings, reading uncommitted records too."""
    return {**reader_config, "isolation.level": "read_uncommitted"}


def _locator(headers: list[tuple[str, bytes | None]] | None) -> Locator | None:
    """The locator of a record (its first header), or None if it has none."""
    if not headers or headers[0][0] != HEADER_LOCATOR:
        return None
    return parse_locator(headers[0][1])


def last_own_offset(
    consumer: Consumer,
    topic: str,
    partition: int,
    first: int,
    mark: int,
    *,
    mine: Callable[[str], bool],
    deadline: float,
    component: str,
) -> int | None:
    """The last offset in ``[first, mark)`` of a record of this shard, committed or not.

    Args:
        consumer: A ``read_uncommitted`` consumer of the sink's cluster.
        topic: The output topic.
        partition: The output partition.
        first: Where the committed read-back stopped (the last stable offset).
        mark: The partition's end when the shard started.
        mine: Whether a source partition key belongs to this shard.
        deadline: When to give up (``time.monotonic()``).
        component: The sink's name in messages.

    Returns:
        The offset, or None if no record of the shard lies in the range.

    Raises:
        SinkTransientError: When the read does not finish by ``deadline``.
        SinkTerminalError: On a fatal consumer error.
    """
    last: int | None = None
    consumer.assign([TopicPartition(topic, partition, first)])
    try:
        while True:
            if time.monotonic() > deadline:
                msg = (
                    f"{component}: reading `{topic}:{partition}` from offset {first} to "
                    f"{mark} (uncommitted) to reconcile did not finish in time; check the "
                    f"brokers or raise `unreachable_timeout`"
                )
                raise SinkTransientError(msg)
            for m in consumer.consume(_BATCH, timeout=0.2):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001
                        return last  # the end, which is at or past the mark
                    if is_fatal(err):
                        msg = (
                            f"{component}: reading back `{topic}:{partition}` failed: "
                            f"{err.name()}; check the topic and the consumer settings"
                        )
                        raise SinkTerminalError(msg)
                    continue
                offset = m.offset()
                if offset is None:
                    continue
                if offset >= mark:
                    return last
                loc = _locator(m.headers())  # type: ignore[arg-type]  # a list as consumed
                if loc is not None and mine(encode_part(loc.topic, loc.partition)):
                    last = offset
                if offset + 1 >= mark:
                    return last
    finally:
        consumer.unassign()
