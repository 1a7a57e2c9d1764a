"""What the metrics read at collection: the counters registered, summed into observations.

Sources and sinks keep plain counters (``KafkaSourceStats``, ``EpochSinkStats``) and
steps keep one :class:`StepCounts` per worker thread; :class:`~.metrics.Metrics`
registers them and, when a reader collects, hands a copy of each list to the functions
here, which sum them per step (partitions and threads of one step are one series) and
yield the observations of the observable instruments and the ``/stats`` counters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from opentelemetry.metrics import Observation

from thalweg_bytewax.runtime.crossings import crossings
from thalweg_bytewax.system.heap_trim import heap_trim_stats

__all__ = [
    "SinkCounters",
    "SinkEntry",
    "SourceCounters",
    "SourceEntry",
    "StepCounts",
    "consumer_lag",
    "coverage_lag",
    "crossing_counter",
    "heap_trim_counter",
    "rejected_counter",
    "rule_warning_counter",
    "sink_counter",
    "sink_own_counters",
    "source_counter",
    "stats",
    "step_counter",
]


class SourceCounters(Protocol):
    """The plain counters a source partition keeps (``KafkaSourceStats``)."""

    records: int
    bytes: int
    batches: int
    transient_errors: int


class SinkCounters(Protocol):
    """The plain counters a sink partition keeps (``EpochSinkStats``)."""

    rows_written: int
    rows_skipped_replay: int
    epochs_committed: int

    def own_counters(self) -> Mapping[str, int]:
        """The counters the sink's class adds to the three above, by name."""
        ...


@dataclass(slots=True)
class SourceEntry:
    """A source partition's counters and its position (for the lag gauges)."""

    step_id: str
    topic: str
    partition: int
    stats: SourceCounters
    next_offset: int | None = None
    high: int | None = None


@dataclass(slots=True)
class SinkEntry:
    """A sink partition's counters and what it has committed, per source partition."""

    step_id: str
    stats: SinkCounters
    committed: Callable[[], Mapping[str, int]]


@dataclass(slots=True)
class StepCounts:
    """One worker thread's counts of one step (written by that thread only)."""

    step_id: str
    records_in: int = 0
    records_out: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    warnings: dict[str, int] = field(default_factory=dict)


def _attrs(step_id: str, topic: str, partition: int) -> dict[str, Any]:
    return {"step_id": step_id, "topic": topic, "partition": partition}


def _per_step(pairs: Iterable[tuple[str, int]]) -> Iterable[Observation]:
    sums: dict[str, int] = {}
    for step_id, n in pairs:
        sums[step_id] = sums.get(step_id, 0) + n
    for step_id, n in sums.items():
        yield Observation(n, {"step_id": step_id})


def source_counter(sources: Iterable[SourceEntry], attr: str) -> Iterable[Observation]:
    """One source counter (``records``, ``bytes``...) per source partition."""
    for s in sources:
        yield Observation(getattr(s.stats, attr), _attrs(s.step_id, s.topic, s.partition))


def sink_counter(sinks: Iterable[SinkEntry], attr: str) -> Iterable[Observation]:
    """One sink counter per step: its partitions (and rebuilt ones) summed, so it only grows."""
    return _per_step((s.step_id, getattr(s.stats, attr)) for s in sinks)


def sink_own_counters(sinks: Iterable[SinkEntry]) -> Iterable[Observation]:
    """Each sink's own counters (Iceberg ``commits``...) per step and counter name."""
    return _per_step_and_key(((s.step_id, dict(s.stats.own_counters())) for s in sinks), "counter")


def step_counter(steps: Iterable[StepCounts], attr: str) -> Iterable[Observation]:
    """One step counter per step: the counts of its threads (workers) summed."""
    return _per_step((c.step_id, getattr(c, attr)) for c in steps)


def rejected_counter(steps: Iterable[StepCounts]) -> Iterable[Observation]:
    """The records each step rejected, per reason, its threads summed."""
    return _per_step_and_key(((c.step_id, c.rejected) for c in steps), "reason")


def rule_warning_counter(steps: Iterable[StepCounts]) -> Iterable[Observation]:
    """The records each step's reporting rules failed, per rule, its threads summed."""
    return _per_step_and_key(((c.step_id, c.warnings) for c in steps), "rule_id")


def _per_step_and_key(
    counts: Iterable[tuple[str, dict[str, int]]], label: str
) -> Iterable[Observation]:
    """Counts keyed per thread (a step's threads each keep a dict) summed per step and key."""
    sums: dict[tuple[str, str], int] = {}
    for step_id, by_key in counts:
        for key, n in list(by_key.items()):  # a copy: its thread goes on adding
            sums[(step_id, key)] = sums.get((step_id, key), 0) + n
    for (step_id, key), n in sums.items():
        yield Observation(n, {"step_id": step_id, label: key})


def consumer_lag(sources: Iterable[SourceEntry]) -> Iterable[Observation]:
    """Each source partition's high watermark less its next offset."""
    for s in sources:
        if s.high is not None and s.next_offset is not None:
            lag = max(0, s.high - s.next_offset)
            yield Observation(lag, _attrs(s.step_id, s.topic, s.partition))


def coverage_lag(
    sources: Iterable[SourceEntry], sinks: Iterable[SinkEntry]
) -> Iterable[Observation]:
    """Per sink step and source partition: the high watermark less what is committed."""
    highs = {f"{s.topic}:{s.partition}": s.high for s in sources if s.high is not None}
    lags: dict[tuple[str, str], int] = {}
    for sink in sinks:
        try:
            committed = dict(sink.committed())
        except Exception:  # noqa: S112 - a closed partition has nothing to report
            continue
        for key, next_offset in committed.items():
            high = highs.get(key)
            if high is not None:
                lag = max(0, high - next_offset)
                k = (sink.step_id, key)
                lags[k] = min(lags.get(k, lag), lag)
    for (step_id, key), lag in lags.items():
        topic, _, part = key.rpartition(":")
        yield Observation(lag, _attrs(step_id, topic, int(part)))


def crossing_counter() -> Iterable[Observation]:
    """The records that crossed between workers, by how they crossed."""
    counts = crossings().as_dict()
    yield Observation(counts["records_pickled"], {"kind": "pickled"})
    yield Observation(counts["other_rows_pickled"], {"kind": "pickled_other"})
    yield Observation(counts["records_handed_over"], {"kind": "handed_over"})


def heap_trim_counter(attr: str) -> Iterable[Observation]:
    """One of the process's heap trim counters (``trims``, ``released_bytes``)."""
    yield Observation(getattr(heap_trim_stats(), attr))


def stats(sources: Iterable[SourceEntry], sinks: Iterable[SinkEntry]) -> dict[str, Any]:
    """The ``sources`` and ``sinks`` of ``/stats``: counters by partition and by sink step."""
    by_partition = {
        f"{s.topic}:{s.partition}": {
            "step_id": s.step_id,
            "records": s.stats.records,
            "bytes": s.stats.bytes,
            "batches": s.stats.batches,
            "transient_errors": s.stats.transient_errors,
            "next_offset": s.next_offset,
            "high_watermark": s.high,
        }
        for s in sources
    }
    by_sink: dict[str, dict[str, int]] = {}
    for sink in sinks:
        acc = by_sink.setdefault(
            sink.step_id, {"rows_written": 0, "rows_skipped_replay": 0, "epochs_committed": 0}
        )
        acc["rows_written"] += sink.stats.rows_written
        acc["rows_skipped_replay"] += sink.stats.rows_skipped_replay
        acc["epochs_committed"] += sink.stats.epochs_committed
        for name, n in sink.stats.own_counters().items():
            acc[name] = acc.get(name, 0) + n
    return {"sources": by_partition, "sinks": by_sink}
