"""Private: the sink partition behind ``FlightSink``: an epoch sink over an ack lane.

The epoch protocol (ownership, order, replay skipping, failed flag) is
:class:`~thalweg_bytewax.runtime.epoch_sink.EpochSinkPartition`'s. Here ``stage()``
hands each source partition's rows to the :class:`~._ack_lane.AckLane` and returns at
once; ``commit_epoch()`` waits, once per epoch, until the lane's confirms cover
everything staged; ``open_partition()`` asks the server which offsets it holds
(``twg.held``), so replays after a crash are skipped; ``held_record_ids()`` asks it
for the record ids over a replayed range (``twg.held_ids``), so a skipped row is
checked against the record the server holds at its offset.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, ClassVar, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
from typing_extensions import override

from thalweg_bytewax import _faults
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.flight.protocol import (
    HELD_IDS_ACTION,
    call_options,
    classify,
    held_ids,
    held_ids_request,
    held_request,
    held_spans,
)
from thalweg_bytewax.runtime.epoch_sink import EpochSinkState, EpochSinkStats

from .._epoch_partition import ConfiguredSinkPartition
from ._ack_lane import RETRY_CAP_S, RETRY_FIRST_S, AckLane, AckLaneStats

if TYPE_CHECKING:
    from .config import FlightSinkConfig

__all__ = ["FlightSinkStats"]

logger = logging.getLogger(__name__)

COMPONENT: Final = "flight sink"
# A `twg.held` call is one small round trip; it gets its own short deadline.
_HELD_TIMEOUT_S = 30.0


class FlightSinkStats(EpochSinkStats):
    """Plain counters of one Flight sink partition; :attr:`lane` holds the ack lane's."""

    __slots__ = ("lane",)

    def __init__(self) -> None:
        super().__init__()
        self.lane = AckLaneStats()

    def own_counters(self) -> dict[str, int]:
        """The ack lane's counters, ``lane_``-prefixed (its gauges are not counters)."""
        lane = self.lane
        return {
            **super().own_counters(),
            "lane_batches_sent": lane.batches_sent,
            "lane_confirms": lane.confirms,
            "lane_blocked_sends": lane.blocked_sends,
            "lane_reconnects": lane.reconnects,
        }


class _FlightPartition(ConfiguredSinkPartition["FlightSinkConfig"]):
    replay_remedy: ClassVar[str] = "write to a new `target`, or clear it on the server"
    merge_remedy: ClassVar[str] = "give each its own `target`"

    def __init__(self, config: FlightSinkConfig, resume: EpochSinkState | None, shard: int) -> None:
        self.stats: FlightSinkStats = FlightSinkStats()
        super().__init__(COMPONENT, config, resume, shard, stats=self.stats)
        token = config.token.resolve() if config.token is not None else None
        self._options = call_options(None, token)
        self._held_options = call_options(_HELD_TIMEOUT_S, token)
        self._descriptor = flight.FlightDescriptor.for_path(config.target)
        self._lane: AckLane | None = None
        self._reads_back: bool | None = None  # whether the server answers `twg.held_ids`

    def _client(self) -> flight.FlightClient:
        return flight.FlightClient(self._config.location)

    def _open_stream(
        self, client: flight.FlightClient, schema: pa.Schema
    ) -> tuple[flight.FlightStreamWriter, flight.FlightMetadataReader]:
        writer, reader = client.do_put(self._descriptor, schema, options=self._options)
        return writer, reader

    @property
    def lane(self) -> AckLane:
        """The ack lane, started on first use."""
        if self._lane is None:
            self._lane = AckLane(
                component=f"{COMPONENT} `{self._config.target}`",
                location=self._config.location,
                connect=self._client,
                open_stream=self._open_stream,
                max_unconfirmed_bytes=self._config.max_unconfirmed_bytes,
                max_burst=self._config.max_burst,
                retry_for=self._config.retry_for.total_seconds(),
            )
            self.stats.lane = self._lane.stats
        return self._lane

    # -- hooks -------------------------------------------------------------------------

    @override
    def open_partition(self, key: str, topic: str, partition: int) -> OffsetCoverage:
        where = f"{COMPONENT} `{self._config.target}`"
        action = held_request(self._config.target, topic, partition)
        deadline = time.monotonic() + self._config.retry_for.total_seconds()
        pause = RETRY_FIRST_S
        while True:  # a server restarting is waited for, as the ack lane does
            try:
                with self._client() as client:
                    results = list(client.do_action(action, options=self._held_options))
                break
            except (flight.FlightError, pa.ArrowException, OSError) as exc:
                error = classify(where, self._config.location, f"asking what `{key}` holds", exc)
                if not error.retryable or time.monotonic() + pause >= deadline:
                    raise error from exc
            time.sleep(pause)
            pause = min(pause * 2, RETRY_CAP_S)
        return OffsetCoverage(held_spans(results, where=where))

    @override
    def held_record_ids(self, key: str, first: int, last: int) -> pa.Table | None:
        where = f"{COMPONENT} `{self._config.target}`"
        topic, _, partition = key.rpartition(":")
        try:
            with self._client() as client:
                if self._reads_back is None:
                    actions = client.list_actions(options=self._held_options)
                    self._reads_back = any(a.type == HELD_IDS_ACTION for a in actions)
                if not self._reads_back:
                    return None  # checked by offset alone, with the replay check's warning
                action = held_ids_request(self._config.target, topic, int(partition), first, last)
                results = list(client.do_action(action, options=self._held_options))
        except (flight.FlightError, pa.ArrowException, OSError) as exc:
            what = f"reading back what `{key}` holds at offsets {first}-{last}"
            raise classify(where, self._config.location, what, exc) from exc
        table = held_ids(results, first, last, where=where)
        if not table.num_rows:
            return None
        cols = self.columns
        return table.rename_columns([cols.source_offset, cols.record_id])

    @override
    def stage(self, key: str, rows: pa.RecordBatch) -> None:
        last = pc.max(rows.column(self.columns.source_offset)).as_py()
        self.lane.send(rows, {key: last})
        _faults.checkpoint("flight.after_send")

    @override
    def commit_epoch(self) -> None:
        if self._lane is None:
            return
        self._lane.wait_confirmed(self._config.confirm_timeout.total_seconds())
        _faults.checkpoint("flight.after_confirm")

    @override
    def abort(self) -> None:
        self._close_lane()

    @override
    def release(self) -> None:
        self._close_lane()

    @override
    def describe_target(self, key: str) -> str:
        return f"flight target `{self._config.target}`"

    def _close_lane(self) -> None:
        lane, self._lane = self._lane, None
        if lane is not None:
            lane.close()
