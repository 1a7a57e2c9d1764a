"""Arrow Flight out: batches with their locators to a Flight server, exactly once.

:class:`FlightSink` is an epoch sink
(:class:`~thalweg_bytewax.runtime.epoch_sink.EpochSinkPartition`) whose writes are
pipelined through an ack lane (:mod:`._ack_lane`): a send returns when the lane accepts
the batch, a background thread sends bursts over one DoPut stream and confirms each
burst's largest offsets with one round trip, and the epoch's snapshot waits for the
last confirm. The wire protocol is :mod:`thalweg_bytewax.flight.protocol`.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from typing_extensions import override

from thalweg_bytewax.records.metadata import DEFAULT_PREFIX
from thalweg_bytewax.runtime.epoch_sink import EpochSinkState
from thalweg_bytewax.runtime.sharded_sink import ShardedEpochSink

from ._partition import FlightSinkStats, _FlightPartition
from .config import DEFAULT_CONFIRM_TIMEOUT, DEFAULT_MAX_UNCONFIRMED_BYTES, FlightSinkConfig

__all__ = ["FlightSink", "FlightSinkStats"]

logger = logging.getLogger(__name__)


class FlightSink(ShardedEpochSink[_FlightPartition]):
    """Send keyed batches with locator columns to an Arrow Flight server.

    Source topic-partitions are the unit of parallelism: each is sent by one shard, over
    that shard's DoPut stream. Exactly-once: a batch is durable when the server confirms
    it, the epoch's snapshot (which stores the source position) waits for the confirm,
    a resumed shard asks the server which offsets it holds (``twg.held``) and skips
    them, and the server skips rows whose locator it already holds. Rows are visible on
    the server from their confirm, which may come before their epoch closes. A send
    blocks only while ``max_unconfirmed_bytes`` are unconfirmed (backpressure).

    Example::

        flow = Dataflow("to_flight")
        raw = op.input("in", flow, KafkaSource(["localhost:9092"], ["orders"]))
        op.output("flight", raw, FlightSink("grpc://127.0.0.1:8815", "orders"))

    Args:
        location: The server, ``grpc://host:port`` (``grpc+tls://`` for TLS).
        target: The name the server stores the rows under.
        shards: Sink partitions the source partitions are spread over.
        max_unconfirmed_bytes: Bytes a shard sends before a confirm; a send blocks past it.
        max_burst: The most batches one confirm covers.
        confirm_timeout: How long an epoch's snapshot waits for its last confirm.
        retry_for: How long a broken stream is reopened and resent before the flow fails.
        token: A bearer token (a ``${env:NAME}`` reference or a value); never printed.
        metadata_prefix: Prefix of the metadata columns.
    """

    def __init__(
        self,
        location: str,
        target: str,
        *,
        shards: int = 4,
        max_unconfirmed_bytes: int = DEFAULT_MAX_UNCONFIRMED_BYTES,
        max_burst: int = 256,
        confirm_timeout: timedelta = DEFAULT_CONFIRM_TIMEOUT,
        retry_for: timedelta = timedelta(seconds=30),
        token: str | None = None,
        metadata_prefix: str = DEFAULT_PREFIX,
    ) -> None:
        self.config = FlightSinkConfig.build(
            {
                "location": location,
                "target": target,
                "shards": shards,
                "max_unconfirmed_bytes": max_unconfirmed_bytes,
                "max_burst": max_burst,
                "confirm_timeout": confirm_timeout,
                "retry_for": retry_for,
                "token": token,
                "metadata_prefix": metadata_prefix,
            }
        )
        self.shards = self.config.shards

    @classmethod
    def from_config(cls, config: FlightSinkConfig) -> FlightSink:
        """The sink a :class:`FlightSinkConfig` describes (a pipeline's ``[sinks.<name>]``).

        Raises:
            ConfigError: When ``config`` is not a ``FlightSinkConfig``.
        """
        config = FlightSinkConfig.checked(config)
        sink = cls.__new__(cls)
        sink.config = config
        sink.shards = config.shards
        return sink

    @override
    def build_shard(
        self, step_id: str, shard: int, resume_state: EpochSinkState | None
    ) -> _FlightPartition:
        return _FlightPartition(self.config, resume_state, shard)
