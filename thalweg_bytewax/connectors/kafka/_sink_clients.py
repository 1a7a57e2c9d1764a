"""Private: the Kafka clients of a ``KafkaSink`` partition, beyond produce and read-back.

:func:`take_marks` notes where the previous run's records end before a transactional
shard reads them back; :func:`close_clients` closes the reader and the producer without
ever publishing, whatever state the producer is in.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from ._sink_offsets import end_offsets
from ._sink_reconcile import Stable
from ._sink_stable import BROKER_ABORT_CHECK_S, uncommitted_config

__all__ = ["close_clients", "take_marks"]

logger = logging.getLogger(__name__)


def take_marks(
    reader_config: dict[str, Any],
    topic: str,
    partitions: list[int],
    *,
    producer_settings: dict[str, Any],
    wait_s: float,
    component: str,
) -> Stable:
    """Note each output partition's end as ``read_uncommitted`` sees it (the marks).

    Taken right after ``init_transactions``: what the previous run wrote lies below.

    The read-back on resume goes on past another producer's open transaction up to
    this shard's records below the mark (see ``_sink_stable``, which also says why
    it never waits for a transaction of this run). Such a transaction is aborted by
    its shard's ``init_transactions`` or by the broker once ``transaction.timeout.ms``
    has passed (it checks every 10 s): the wait may last that long.

    Args:
        reader_config: The sink's read-back consumer settings.
        topic: The output topic.
        partitions: Its partitions.
        producer_settings: The shard's producer settings (``transaction.timeout.ms``).
        wait_s: How long the read-back waits for an unreachable broker.
        component: The sink's name in messages.

    Returns:
        The marks and how the read-back reads beyond the last stable offset.
    """
    config = uncommitted_config(reader_config)
    uncommitted = Consumer(config)
    try:
        marks = end_offsets(uncommitted, topic, partitions, wait_s, component)
    finally:
        uncommitted.close()
    txn_timeout_s = float(producer_settings.get("transaction.timeout.ms", 60_000)) / 1000
    return Stable(
        marks=marks,
        uncommitted_config=config,
        wait_s=max(wait_s, txn_timeout_s + BROKER_ABORT_CHECK_S),
    )


def close_clients(
    reader: Consumer, producer: Producer, *, fenced: bool, component: str, shard: int
) -> None:
    """Close the read-back consumer and the producer, publishing nothing.

    Args:
        reader: The read-back consumer.
        producer: The producer.
        fenced: Whether a newer producer took over the transactional id (a fenced
            producer refuses to purge).
        component: The sink's name in messages.
        shard: The partition's shard.
    """
    try:
        reader.close()
    finally:
        # Nothing is flushed here: close() must never publish (see the base). Queued
        # and in-flight records are purged (those already sent may still land and are
        # found by the reconciliation on resume), then the client is closed so that
        # its threads stop reconnecting to brokers that are gone.
        try:
            if not fenced:
                producer.purge(in_queue=True, in_flight=True)
                producer.poll(0)
        except KafkaException as exc:
            _log_fatal_at_close(exc, component, shard)
        # A producer fenced by a newer one (same transactional.id) warns on close
        # that it could not abort its transaction; the epoch has already failed
        # loudly, so the warning is logged rather than raised from close().
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                producer.close()
            except KafkaException as exc:
                _log_fatal_at_close(exc, component, shard)
        for warning in caught:
            logger.warning("%s: closing the producer: %s", component, warning.message)


def _log_fatal_at_close(exc: KafkaException, component: str, shard: int) -> None:
    """Log a producer's fatal error met while closing it; raise any other error.

    A producer in a fatal state (fenced by a newer instance of its transactional id,
    most often) refuses to purge or to abort: nothing it holds can become visible
    any more, and the failure that ended the run has already been raised.
    """
    err = exc.args[0] if exc.args else None
    if not isinstance(err, KafkaError) or not err.fatal():
        raise exc
    logger.info(
        "%s: shard %s closed its producer after a fatal error (%s)",
        component,
        shard,
        err.name(),
    )
