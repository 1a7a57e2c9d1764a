"""Private: the defaults of a ``KafkaSink`` and the librdkafka producer settings thalweg sets.

The settings themselves are :class:`~thalweg_bytewax.connectors.kafka.config.KafkaSinkConfig`
(module ``config``); the producer property names thalweg sets live here as constants, in
one place.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

__all__ = [
    "DEFAULT_DELIVERY_TIMEOUT",
    "DEFAULT_QUEUE_MAX_BYTES",
    "DEFAULT_QUEUE_MAX_MESSAGES",
    "DEFAULT_SINK_METADATA_TIMEOUT",
    "DEFAULT_SINK_SHARDS",
    "READER_SETTING_PREFIXES",
    "RESERVED_HEADER_PREFIX",
    "Partitioner",
]

Partitioner = Literal["key", "source"]
"""How records find their output partition: by key (murmur2, as Java clients do) or the
partition number of their source partition."""

# Header names the sink writes itself (the locator): a user's `headers` may not take them.
RESERVED_HEADER_PREFIX = "_twg."

# librdkafka producer property names, in one place.
ENABLE_IDEMPOTENCE = "enable.idempotence"
ACKS = "acks"
PARTITIONER = "partitioner"
DELIVERY_REPORT_ONLY_ERROR = "delivery.report.only.error"
MESSAGE_TIMEOUT_MS = "message.timeout.ms"
QUEUE_MAX_MESSAGES = "queue.buffering.max.messages"
QUEUE_MAX_KBYTES = "queue.buffering.max.kbytes"
LINGER_MS = "linger.ms"
TRANSACTIONAL_ID = "transactional.id"
TRANSACTION_TIMEOUT_MS = "transaction.timeout.ms"
ENABLE_PARTITION_EOF = "enable.partition.eof"
# Java clients' partitioner: a key lands where a Java producer would put it.
MURMUR2 = "murmur2_random"
# A transaction spans at least this long (librdkafka's default is 60 s).
MIN_TRANSACTION_TIMEOUT_MS = 60_000

# The settings of `librdkafka` the read-back consumer takes too (security, client
# identity, sockets); producer-only ones are left out.
READER_SETTING_PREFIXES = ("security.", "sasl.", "ssl.", "client.", "socket.")

DEFAULT_SINK_SHARDS = 16
DEFAULT_DELIVERY_TIMEOUT = timedelta(seconds=30)
DEFAULT_SINK_METADATA_TIMEOUT = timedelta(seconds=10)
# The local queue bounds the sink's memory: librdkafka refuses more (BufferError) and
# the sink waits for deliveries. 64 MiB / 100k records keeps several 10k-record polls
# in flight (measured on benchmarks/kafka_sink.py, docs/benchmarks.md "Kafka sink").
DEFAULT_QUEUE_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_QUEUE_MAX_MESSAGES = 100_000
