"""Kafka inputs and outputs of thalweg-bytewax.

``from thalweg_bytewax.connectors.kafka import KafkaSource`` is the public import path;
the modules behind it (``source``, ``stats`` and the private configuration, metadata,
partition, resume and error-classification modules) may move.

:class:`KafkaSource` reads topics as keyed RawBatches, one Bytewax partition per
topic-partition, resuming exactly after the last record emitted; its counters are
:class:`KafkaSourceStats`, and :class:`KafkaPartitionState` is the resume state it keeps
in Bytewax recovery.

:class:`KafkaSink` writes keyed Arrow batches (or raw records) to a topic, each input
record exactly once across crashes (see :mod:`.sink`); its counters are
:class:`KafkaSinkStats`. ``thalweg_bytewax.connectors.kafka.dlq`` turns DLQ batches into
Kafka records with Kafka Connect's error headers.
"""

from __future__ import annotations

from .sink import KafkaSink, KafkaSinkStats
from .source import KafkaPartitionState, KafkaSource, StartingOffset
from .stats import KafkaSourceStats

__all__ = [
    "KafkaPartitionState",
    "KafkaSink",
    "KafkaSinkStats",
    "KafkaSource",
    "KafkaSourceStats",
    "StartingOffset",
]
