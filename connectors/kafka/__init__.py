"""Kafka inputs of thalweg-bytewax.

``from thalweg_bytewax.connectors.kafka import KafkaSource`` is the public import path;
the modules behind it (``source``, ``stats`` and the private configuration, metadata,
partition, resume and error-classification modules) may move.

:class:`KafkaSource` reads topics as keyed RawBatches, one Bytewax partition per
topic-partition, resuming exactly after the last record emitted; its counters are
:class:`KafkaSourceStats`, and :class:`KafkaPartitionState` is the resume state it keeps
in Bytewax recovery.
"""

from __future__ import annotations

from .source import KafkaPartitionState, KafkaSource, StartingOffset
from .stats import KafkaSourceStats

__all__ = ["KafkaPartitionState", "KafkaSource", "KafkaSourceStats", "StartingOffset"]
