"""What a recovery achieved: the plan against the sink's coverage after the replay.

What the sink's coverage now holds of the planned offsets is what was recovered; what it
still lacks (holes the caller accepted left out) is reported as such, never as
recovered. The plan is :mod:`thalweg_bytewax.coverage.recovery_plan`'s.

Example::

    outcome = recovery_outcome(plan, store, holes=holes)
    outcome.recovered_offsets, outcome.missing_offsets
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from thalweg_bytewax.coverage.recovery_plan import (
    PartitionKey,
    RecoveryPlan,
    _minus,
    _spans_text,
)
from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.coverage.store import CoverageStore

__all__ = ["RecoveryOutcome", "recovery_outcome"]


@dataclass(frozen=True)
class RecoveryOutcome:
    """What a recovery achieved, from the sink's coverage after the replay.

    Attributes:
        recovered: Per partition, the planned offsets the sink's coverage now holds.
        still_missing: Per partition, the planned offsets it still lacks (holes the
            caller accepted left out).
    """

    recovered: dict[PartitionKey, OffsetCoverage]
    still_missing: dict[PartitionKey, OffsetCoverage]

    @property
    def recovered_offsets(self) -> int:
        """How many planned offsets the sink now holds."""
        return sum(cov.size for cov in self.recovered.values())

    @property
    def missing_offsets(self) -> int:
        """How many planned offsets the sink still lacks."""
        return sum(cov.size for cov in self.still_missing.values())

    def describe_missing(self) -> str:
        """One line per partition still lacking offsets."""
        return "\n".join(
            f"{topic}:{part} {_spans_text(cov)} ({cov.size:,} offsets)"
            for (topic, part), cov in sorted(self.still_missing.items())
        )


def recovery_outcome(
    plan: RecoveryPlan,
    store: CoverageStore,
    *,
    holes: Mapping[PartitionKey, OffsetCoverage] | None = None,
) -> RecoveryOutcome:
    """Compare the plan with what the store now records for the sink.

    The store may lag the sink by the epoch a crash interrupted, never lead it: on a
    clean finish every committed epoch is recorded, so what it holds is what landed.

    Args:
        plan: The recovery plan that was replayed.
        store: The coverage store the sink records into.
        holes: Planned offsets accepted as holding no record (left out of the lack).
    """
    now = {(e.topic, e.partition): e.coverage for e in store.entries(plan.sink)}
    recovered: dict[PartitionKey, OffsetCoverage] = {}
    missing: dict[PartitionKey, OffsetCoverage] = {}
    for key, wanted in sorted(plan.missing.items()):
        held = now.get(key, OffsetCoverage())
        got = _minus(wanted, _minus(wanted, held))
        lacking = _minus(_minus(wanted, held), (holes or {}).get(key, OffsetCoverage()))
        if got:
            recovered[key] = got
        if lacking:
            missing[key] = lacking
    return RecoveryOutcome(recovered, missing)
