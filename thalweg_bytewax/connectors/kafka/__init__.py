"""Kafka inputs and outputs of thalweg-bytewax.

``from thalweg_bytewax.connectors.kafka import KafkaSource`` is the public import path;
the modules behind it (``source``, ``stats`` and the private configuration, metadata,
partition, resume and error-classification modules) may move.

:class:`KafkaSource` reads topics as keyed RawBatches, one Bytewax partition per
topic-partition, resuming exactly after the last record emitted; its counters are
:class:`KafkaSourceStats`, and :class:`KafkaPartitionState` is the resume state it keeps
in Bytewax recovery. :class:`KafkaSourceConfig` (module ``config``) is its settings as
one frozen model: what its keywords build, and what a pipeline's ``[source]`` table with
``kind = "kafka"`` loads.

:class:`KafkaSink` writes keyed Arrow batches (or raw records) to a topic, each input
record exactly once across crashes (see :mod:`.sink`); its counters are
:class:`KafkaSinkStats` and its settings :class:`KafkaSinkConfig` (module ``config``),
what a pipeline's ``[sinks.<name>]`` table with ``kind = "kafka"`` loads too.
``thalweg_bytewax.connectors.kafka.dlq`` turns DLQ batches into
Kafka records with Kafka Connect's error headers.

Each name loads its module on first use: a flow that only reads does not load the sink.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_reexports

if TYPE_CHECKING:
    from .config import KafkaSinkConfig as KafkaSinkConfig
    from .config import KafkaSourceConfig as KafkaSourceConfig
    from .sink import KafkaSink as KafkaSink
    from .source import KafkaPartitionState as KafkaPartitionState
    from .source import KafkaSource as KafkaSource
    from .source import StartingOffset as StartingOffset
    from .stats import KafkaSinkStats as KafkaSinkStats
    from .stats import KafkaSourceStats as KafkaSourceStats

__getattr__, __dir__ = lazy_reexports(globals())
