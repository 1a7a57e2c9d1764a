"""How an epoch sink partition is wired to its flow: admission and observability.

:meth:`EpochWiring.acknowledge_as` releases the sources' admission budget as rows are
staged; :meth:`EpochWiring.observe_as` exports the partition's counters, commit
durations and health under its output step's id. Private to
:mod:`thalweg_bytewax.runtime.epoch_sink`, whose
:class:`~thalweg_bytewax.runtime.epoch_sink.EpochSinkPartition` mixes
:class:`EpochWiring` in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Protocol

from thalweg_bytewax.coverage._replay_check import Ledger
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.observability.gate import observe_sink_partition
from thalweg_bytewax.runtime import admission

if TYPE_CHECKING:
    from thalweg_bytewax.observability.hooks import SinkObserver
    from thalweg_bytewax.runtime.sink_stats import EpochSinkStats

__all__ = ["EpochWiring"]


class _Partition(Protocol):
    """What the wiring reads of the partition it is mixed into."""

    readiness_critical: ClassVar[bool]
    component: str
    shard: int

    @property
    def stats(self) -> EpochSinkStats: ...

    _ledgers: dict[str, Ledger]
    _obs: SinkObserver | None
    _observed_as: str | None
    _acknowledge_as: tuple[str, str] | None


class EpochWiring:
    """Admission acknowledgements and observability of an epoch sink partition."""

    _obs: SinkObserver | None
    _observed_as: str | None
    _acknowledge_as: tuple[str, str] | None

    def acknowledge_as(self: _Partition, step_id: str) -> None:
        """Acknowledge each source partition's rows as they are staged, as sink ``step_id``.

        The acknowledgements release the sources' admission budget
        (:mod:`thalweg_bytewax.runtime.admission`): a source partition of this process
        waits while more than its budget is emitted and not yet staged by every sink
        that acknowledges it. Dead-letter batches are not acknowledged (a DLQ sink sees
        a partition's rejects only, and would hold it back).
        """
        flow = admission.flow_of(step_id)
        self._acknowledge_as = (flow, step_id)
        admission.ledger().expect_acknowledgements(flow)

    def observe_as(self: _Partition, step_id: str) -> None:
        """Export this partition's counters, commit durations and health under ``step_id``.

        ``step_id`` is the id Bytewax gives the output step (``flow.step``), so two sinks
        of one class are two series. :meth:`ShardedEpochSink.build_part
        <thalweg_bytewax.runtime.sharded_sink.ShardedEpochSink.build_part>` calls it; a
        second call with another id is refused (a partition has one step), the same id
        is a no-op. Nothing is registered while observability is off.

        Raises:
            ConfigError: When the partition is already observed under another step id.
        """
        if self._observed_as is not None:
            if self._observed_as == step_id:
                return
            msg = (
                f"{self.component}: partition #{self.shard} is observed as step "
                f"`{self._observed_as}`; got a second step id `{step_id}`; build one "
                "partition per output step"
            )
            raise ConfigError(msg)
        self._observed_as = step_id
        self._obs = observe_sink_partition(
            step_id,
            f"{step_id} ({self.component}) #{self.shard}",
            self.stats,
            lambda: {key: ledger.next_offset for key, ledger in self._ledgers.items()},
            critical=self.readiness_critical,
        )
