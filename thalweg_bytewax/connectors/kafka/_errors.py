"""Private: classification of librdkafka errors, by error code, never by message text.

A consume or client error is either transient (a healthy cluster recovers from it on its
own: retried with back-off and counted), a truncation (the position is no longer in the
partition's log: the resume checks report it) or fatal (the flow fails, naming the
partition and offset).
"""

from __future__ import annotations

from confluent_kafka import KafkaError

__all__ = ["is_fatal", "is_truncation"]

# Errors that a healthy cluster recovers from on its own (connections, leadership
# moves, timeouts): retried with back-off and counted. Everything else that librdkafka
# does not flag retriable fails the flow, naming the partition and offset: message-level
# errors (a corrupt or undecompressable batch, log truncation) mean librdkafka moved past
# records, and a deleted partition would otherwise be retried forever in silence.
_TRANSIENT_CODES = frozenset(
    {
        KafkaError._TRANSPORT,  # noqa: SLF001 - librdkafka's public local error codes
        KafkaError._ALL_BROKERS_DOWN,  # noqa: SLF001
        KafkaError._TIMED_OUT,  # noqa: SLF001
        KafkaError._RESOLVE,  # noqa: SLF001
        KafkaError._NODE_UPDATE,  # noqa: SLF001
        KafkaError._WAIT_COORD,  # noqa: SLF001
        KafkaError._INTR,  # noqa: SLF001
        # A request in flight to a broker that left the cluster's metadata (a node
        # stopped): the partition's new leader answers the retry.
        KafkaError._DESTROY_BROKER,  # noqa: SLF001
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError.FENCED_LEADER_EPOCH,
        # A new leader whose high watermark has not caught up yet answers an offset
        # read with this until it has (a broker restarted under the read).
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.THROTTLING_QUOTA_EXCEEDED,
    }
)

_TRUNCATION_CODES = frozenset(
    {
        KafkaError._AUTO_OFFSET_RESET,  # noqa: SLF001 - librdkafka's public local error codes
        KafkaError._LOG_TRUNCATION,  # noqa: SLF001
        KafkaError.OFFSET_OUT_OF_RANGE,
    }
)


def is_fatal(err: KafkaError) -> bool:
    """Whether a consume or client error must fail the flow (vs. be retried with backoff).

    An allow-list of transient conditions; anything unknown is fatal, because failing
    loudly costs a restart while retrying in silence can cost records.
    """
    if err.fatal():
        return True
    if err.retriable():
        return False
    return err.code() not in _TRANSIENT_CODES


def is_truncation(err: KafkaError) -> bool:
    """Whether a consume error says the position is no longer in the partition's log."""
    return err.code() in _TRUNCATION_CODES
