"""What ``thalweg recover`` replays into a lagging sink, and the retention guard.

A recovery replays offsets from the raw lane into one sink. Per source partition:

1. **What should be there**: the raw lane's coverage as recorded in the coverage store
   (everything the raw lane ever landed), or, when the raw lane records no coverage,
   what its files hold now; cut to the ``--from`` / ``--to`` window when one is given.
2. **What is missing**: that, minus the sink's recorded coverage.
3. **The retention guard**: every missing offset must still be in the raw lane's files
   (``held``). If a retention policy or a hand deleted files the sink still needs,
   :func:`check_retention` refuses, naming the topic, partition and offsets no longer
   held — nothing is replayed then, so a partial recovery never looks complete.

4. **The lane check**: a file's name says which offsets it holds; its rows are what a
   replay reads. :func:`check_lane_rows` refuses a plan with offsets a file is named
   for but holds no row of (a file truncated or rewritten by hand, rows lost), naming
   the file and the offsets; ``allow_holes`` accepts them for topics whose offsets
   legitimately carry no record (transaction markers, compaction).
5. **The report**: after the replay,
   :func:`~thalweg_bytewax.coverage.recovery_outcome.recovery_outcome` compares the plan
   with the sink's coverage as the store now records it (a module of its own).

Nothing here reads Parquet or imports Bytewax: the caller says what the raw lane holds
(:func:`thalweg_bytewax.connectors.raw_lane.lane_held_offsets` reads it from the
finalized file names).

Example::

    plan = plan_recovery(store, "orders.orders_lane", raw_lane="orders.raw_lane",
                         held=lane_held_offsets("thalweg-data/raw"))
    check_retention(plan, held, lane="thalweg-data/raw")
    plan.missing          # {("orders", 0): OffsetCoverage([(400, 799)]), ...}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.coverage.store import CoverageStore
from thalweg_bytewax.errors import ConfigError, SourceError

__all__ = [
    "OffsetBounds",
    "RawLane",
    "RecoveryPlan",
    "check_lane_rows",
    "check_retention",
    "parse_offsets",
    "plan_recovery",
]

PartitionKey = tuple[str, int]
"""A source partition: ``(topic, partition)``."""

OffsetBounds = dict[PartitionKey | None, int]
"""A bound per source partition; the ``None`` key applies to every partition."""

# Missing spans listed in a refusal before the rest are only counted.
_MAX_LISTED = 10
_BOUND = re.compile(r"^(?:(?P<topic>.+):(?P<partition>\d+)=)?(?P<offset>\d+)$")


@dataclass(frozen=True)
class RawLane:
    """Where a flow's raw lane is, and how the coverage store names it.

    A flow module that supports ``thalweg recover`` returns one from ``recovery_lane()``.

    Attributes:
        path: The raw lane directory (as ``ParquetSink`` writes it).
        sink_id: The raw lane's id in the coverage store (its output step id).
        store: The coverage store: a path (SQLite) or a ``postgresql://`` URL.
    """

    path: str
    sink_id: str
    store: str


@dataclass(frozen=True)
class RecoveryPlan:
    """The offsets to replay into one sink, per source partition.

    Attributes:
        sink: The sink's id in the coverage store.
        missing: Per ``(topic, partition)``, the offsets the sink lacks (never empty).
    """

    sink: str
    missing: dict[PartitionKey, OffsetCoverage] = field(default_factory=dict)

    @property
    def offsets(self) -> int:
        """How many offsets the plan replays (holes in the lane included)."""
        return sum(cov.size for cov in self.missing.values())

    def describe(self) -> str:
        """One line per partition, e.g. ``orders:0 400..799 (400 offsets)``."""
        lines = []
        for (topic, part), cov in sorted(self.missing.items()):
            spans = ", ".join(f"{lo}..{hi}" for lo, hi in cov.spans[:_MAX_LISTED])
            more = len(cov.spans) - _MAX_LISTED
            spans += f" (+{more} ranges)" if more > 0 else ""
            lines.append(f"{topic}:{part} {spans} ({cov.size:,} offsets)")
        return "\n".join(lines)


def parse_offsets(text: str, flag: str) -> OffsetBounds:
    """Parse ``--from`` / ``--to``: ``N`` for every partition, or ``topic:partition=N,…``.

    Args:
        text: The flag's value, e.g. ``"100"`` or ``"orders:0=100,orders:1=250"``.
        flag: The flag's name, for messages.

    Raises:
        ConfigError: When a part is neither form.
    """
    out: OffsetBounds = {}
    for part in (p.strip() for p in text.split(",")):
        m = _BOUND.match(part)
        if m is None:
            msg = (
                f"recover: `{flag}` expected `N` or `topic:partition=N[,...]` with N >= 0; "
                f"got {part!r}"
            )
            raise ConfigError(msg)
        key = (m["topic"], int(m["partition"])) if m["topic"] is not None else None
        out[key] = int(m["offset"])
    return out


def _bound(bounds: OffsetBounds | None, key: PartitionKey) -> int | None:
    if not bounds:
        return None
    return bounds.get(key, bounds.get(None))


def _cut(cov: OffsetCoverage, first: int, last: int) -> OffsetCoverage:
    """The part of ``cov`` within ``first..last``."""
    return OffsetCoverage(
        (max(lo, first), min(hi, last)) for lo, hi in cov.spans if lo <= last and hi >= first
    )


def _minus(cov: OffsetCoverage, other: OffsetCoverage) -> OffsetCoverage:
    """The offsets of ``cov`` that ``other`` does not hold."""
    return OffsetCoverage(gap for lo, hi in cov.spans for gap in other.uncovered(lo, hi))


def plan_recovery(
    store: CoverageStore,
    sink: str,
    *,
    raw_lane: str,
    held: Mapping[PartitionKey, OffsetCoverage],
    start: OffsetBounds | None = None,
    end: OffsetBounds | None = None,
    only: PartitionKey | tuple[str, None] | None = None,
) -> RecoveryPlan:
    """The offsets ``sink`` lacks of what the raw lane landed, per source partition.

    Args:
        store: The coverage store both the raw lane and the sink record into.
        sink: The lagging sink's id (e.g. ``"orders.orders_lane"``). A sink with no
            row in the store lacks everything.
        raw_lane: The raw lane's id in the store. When it has no row, what its files
            hold (``held``) stands for what it landed.
        held: What the raw lane's files hold now, per source partition.
        start: Replay only offsets at or after these (``--from``, inclusive).
        end: Replay only offsets at or before these (``--to``, inclusive).
        only: Only this ``(topic, partition)``; ``(topic, None)`` for every partition
            of a topic.

    Returns:
        The plan; empty when the sink lacks nothing.

    Raises:
        ConfigError: When ``sink`` is the raw lane itself, or a window is empty.
    """
    if sink == raw_lane:
        msg = (
            f"recover: sink `{sink}` expected a sink fed from the raw lane; got the raw lane "
            f"itself (it is the source of recovery: replay it from Kafka)"
        )
        raise ConfigError(msg)
    entries = store.entries()
    landed = {(e.topic, e.partition): e.coverage for e in entries if e.sink == raw_lane}
    if not landed:
        landed = dict(held)
    has = {(e.topic, e.partition): e.coverage for e in entries if e.sink == sink}
    plan = RecoveryPlan(sink)
    for key, cov in sorted(landed.items()):
        if only is not None and (key[0] != only[0] or only[1] not in (None, key[1])):
            continue
        lo, hi = _bound(start, key), _bound(end, key)
        if lo is not None and hi is not None and lo > hi:
            msg = (
                f"recover: window of `{key[0]}:{key[1]}` expected `--from` <= `--to`; got "
                f"{lo} > {hi}"
            )
            raise ConfigError(msg)
        if cov.last is None:
            continue
        wanted = _cut(cov, lo if lo is not None else 0, hi if hi is not None else cov.last)
        missing = _minus(wanted, has.get(key, OffsetCoverage()))
        if missing:
            plan.missing[key] = missing
    return plan


def check_retention(
    plan: RecoveryPlan, held: Mapping[PartitionKey, OffsetCoverage], *, lane: str
) -> None:
    """Refuse a plan that needs offsets the raw lane no longer holds.

    Args:
        plan: The recovery plan.
        held: What the raw lane's files hold now, per source partition.
        lane: The raw lane, for the message.

    Raises:
        SourceError: Naming each topic, partition and the offsets no longer held.
    """
    lost = []
    for key, cov in sorted(plan.missing.items()):
        gone = _minus(cov, held.get(key, OffsetCoverage()))
        if gone:
            spans = ", ".join(f"{lo}..{hi}" for lo, hi in gone.spans[:_MAX_LISTED])
            more = len(gone.spans) - _MAX_LISTED
            spans += f" (+{more} ranges)" if more > 0 else ""
            lost.append(f"`{key[0]}:{key[1]}` offsets {spans} ({gone.size:,} offsets)")
    if lost:
        msg = (
            f"recover: raw lane `{lane}` no longer holds what sink `{plan.sink}` is missing: "
            f"{'; '.join(lost)}; expected the raw lane to hold every missing offset "
            f"(retention removed them?). Nothing was replayed: narrow the window with "
            f"`--from`/`--to` to what the lane holds, or rebuild the sink from the source"
        )
        raise SourceError(msg)


def _spans_text(cov: OffsetCoverage) -> str:
    spans = ", ".join(f"{lo}..{hi}" for lo, hi in cov.spans[:_MAX_LISTED])
    more = len(cov.spans) - _MAX_LISTED
    return spans + (f" (+{more} ranges)" if more > 0 else "")


def check_lane_rows(
    plan: RecoveryPlan,
    missing_rows: Mapping[PartitionKey, list[tuple[str, OffsetCoverage]]],
    *,
    lane: str,
    allow_holes: bool = False,
    written_holes: Mapping[PartitionKey, list[tuple[str, OffsetCoverage]]] | None = None,
) -> dict[PartitionKey, OffsetCoverage]:
    """Refuse a plan with offsets a lane file is named for but holds no row of.

    Args:
        plan: The recovery plan.
        missing_rows: Per partition, ``(file name, offsets)`` of planned offsets a file
            is named for and holds no row of (``lane_rows_missing``).
        lane: The raw lane, for the message.
        allow_holes: Accept them: the topic has offsets without a record (transaction
            markers, compaction), so a lane file spans offsets it holds no row of.
        written_holes: Offsets missing from files whose footer vouches they were
            missing when the sink wrote them (``lane_rows_missing(written_holes=...)``):
            the source had no record there, so they are accepted without
            ``allow_holes``.

    Returns:
        The accepted holes per partition (``written_holes``, and the rest only with
        ``allow_holes``): offsets no replay can land, left out of what the recovery
        must achieve.

    Raises:
        SourceError: Naming each partition, file and offsets, when not ``allow_holes``.
    """
    holes = {
        key: OffsetCoverage(span for _, cov in files for span in cov.spans)
        for key, files in sorted(missing_rows.items())
        if key in plan.missing
    }
    holes = {key: cov for key, cov in holes.items() if cov}
    written = {
        key: OffsetCoverage(span for _, cov in files for span in cov.spans)
        for key, files in sorted((written_holes or {}).items())
        if key in plan.missing
    }
    if not holes or allow_holes:
        for key, cov in written.items():
            holes[key] = holes[key].union(cov) if key in holes else cov
        return {key: cov for key, cov in holes.items() if cov}
    parts = []
    for key, files in sorted(missing_rows.items()):
        named = "; ".join(f"file `{name}` lacks {_spans_text(cov)}" for name, cov in files[:3])
        more = f" (+{len(files) - 3} files)" if len(files) > 3 else ""  # noqa: PLR2004
        total = holes[key].size
        parts.append(f"`{key[0]}:{key[1]}` {total:,} offsets ({named}{more})")
    msg = (
        f"recover: raw lane `{lane}` claims offsets its files hold no row of: "
        f"{'; '.join(parts)}; expected each file to hold a row of every planned offset its "
        f"name `<first>-<last>` covers. Nothing was replayed: a replay would report them "
        f"recovered while they never land. If the topic has offsets without a record "
        f"(transaction markers, a compacted topic), pass `--allow-holes`; otherwise the "
        f"lane lost rows: rebuild the sink from the source for those offsets"
    )
    raise SourceError(msg)
