"""The process's metrics: one OpenTelemetry meter provider, read by Prometheus.

Exporter choice: ``opentelemetry-exporter-prometheus`` (its ``PrometheusMetricReader``,
matching the installed SDK) writes into ``prometheus_client``'s global ``REGISTRY``.
That keeps one registry per process — the one our ``/metrics`` renders, and the one
Bytewax's own ``/metrics`` (``BYTEWAX_DATAFLOW_API_ENABLED=1``) serves next to its
runtime metrics — and it keeps OpenTelemetry as the single API, so an OTLP reader can be
added without touching an instrument. The provider is therefore created once per
process (:func:`enable_metrics`); a second reader on the same registry would export
every series twice.

Core counters (``KafkaSourceStats``, ``EpochSinkStats``) are registered here by the
connector hooks and read by observable-instrument callbacks at collection time; the
step counters and histograms are recorded once per batch.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader

from . import instruments as spec

__all__ = [
    "WINDOW_SECONDS",
    "Metrics",
    "SinkCounters",
    "SourceCounters",
    "ThroughputWindow",
    "enable_metrics",
    "metrics",
]

WINDOW_SECONDS = 30
"""The span of the rolling per-stage digest served by ``/stats``."""


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


@dataclass(slots=True)
class _Source:
    step_id: str
    topic: str
    partition: int
    stats: SourceCounters
    next_offset: int | None = None
    high: int | None = None


@dataclass(slots=True)
class _Sink:
    step_id: str
    stats: SinkCounters
    committed: Callable[[], Mapping[str, int]]


@dataclass(slots=True)
class _Stage:
    records: int = 0
    batches: int = 0
    bytes: int = 0


@dataclass(slots=True)
class ThroughputWindow:
    """Per-stage records, batches and bytes over the last :data:`WINDOW_SECONDS`.

    One-second buckets: :meth:`add` is O(1) per batch; :meth:`digest` sums them.
    """

    seconds: int = WINDOW_SECONDS
    _buckets: deque[tuple[int, dict[str, _Stage]]] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, stage: str, records: int, nbytes: int, *, now: float | None = None) -> None:
        """Count one batch of ``records`` rows and ``nbytes`` Arrow bytes for ``stage``."""
        sec = int(time.monotonic() if now is None else now)
        with self._lock:
            if not self._buckets or self._buckets[-1][0] != sec:
                self._buckets.append((sec, {}))
                while self._buckets and self._buckets[0][0] <= sec - self.seconds:
                    self._buckets.popleft()
            st = self._buckets[-1][1].setdefault(stage, _Stage())
            st.records += records
            st.batches += 1
            st.bytes += nbytes

    def digest(self, *, now: float | None = None) -> dict[str, dict[str, float]]:
        """Per stage: records, batches, bytes, records/s and average bytes per batch/record."""
        sec = int(time.monotonic() if now is None else now)
        total: dict[str, _Stage] = {}
        with self._lock:
            for when, stages in self._buckets:
                if when <= sec - self.seconds:
                    continue
                for name, st in stages.items():
                    acc = total.setdefault(name, _Stage())
                    acc.records += st.records
                    acc.batches += st.batches
                    acc.bytes += st.bytes
        return {
            name: {
                "records": st.records,
                "batches": st.batches,
                "bytes": st.bytes,
                "records_per_s": round(st.records / self.seconds, 3),
                "avg_batch_bytes": round(st.bytes / st.batches, 1) if st.batches else 0.0,
                "avg_record_bytes": round(st.bytes / st.records, 1) if st.records else 0.0,
            }
            for name, st in sorted(total.items())
        }


def _attrs(step_id: str, topic: str, partition: int) -> dict[str, Any]:
    return {"step_id": step_id, "topic": topic, "partition": partition}


class Metrics:
    """The instruments of :mod:`.instruments`, on one meter provider, plus what they read.

    Args:
        readers: Metric readers (the Prometheus reader, an OTLP reader, or an in-memory
            one); none makes the instruments record into nothing.
    """

    def __init__(self, readers: Sequence[MetricReader] = ()) -> None:
        self._lock = threading.Lock()
        self._sources: dict[tuple[str, str, int], _Source] = {}
        self._sinks: list[_Sink] = []
        self.window = ThroughputWindow()
        self.provider = MeterProvider(metric_readers=list(readers))
        meter = self.provider.get_meter("thalweg_bytewax")

        def observable(s: spec.InstrumentSpec, read: Callable[[], Iterable[Observation]]) -> None:
            def callback(_: CallbackOptions) -> Iterable[Observation]:
                return list(read())

            if s.kind is spec.InstrumentKind.OBSERVABLE_COUNTER:
                meter.create_observable_counter(s.name, [callback], s.unit, s.description)
            else:
                meter.create_observable_gauge(s.name, [callback], s.unit, s.description)

        for s, attr in (
            (spec.SOURCE_RECORDS, "records"),
            (spec.SOURCE_BYTES, "bytes"),
            (spec.SOURCE_BATCHES, "batches"),
            (spec.SOURCE_TRANSIENT_ERRORS, "transient_errors"),
        ):
            observable(s, lambda attr=attr: self._source_counter(attr))  # type: ignore[misc]
        for s, attr in (
            (spec.SINK_ROWS_WRITTEN, "rows_written"),
            (spec.SINK_ROWS_SKIPPED, "rows_skipped_replay"),
            (spec.SINK_EPOCHS, "epochs_committed"),
        ):
            observable(s, lambda attr=attr: self._sink_counter(attr))  # type: ignore[misc]
        observable(spec.CONSUMER_LAG, self._consumer_lag)
        observable(spec.COVERAGE_LAG, self._coverage_lag)

        def hist(s: spec.InstrumentSpec) -> Any:
            return meter.create_histogram(
                s.name, s.unit, s.description, explicit_bucket_boundaries_advisory=s.buckets
            )

        self._in = meter.create_counter(
            spec.STEP_RECORDS_IN.name, spec.STEP_RECORDS_IN.unit, spec.STEP_RECORDS_IN.description
        )
        self._out = meter.create_counter(
            spec.STEP_RECORDS_OUT.name,
            spec.STEP_RECORDS_OUT.unit,
            spec.STEP_RECORDS_OUT.description,
        )
        self._rejected = meter.create_counter(
            spec.REJECTED_RECORDS.name,
            spec.REJECTED_RECORDS.unit,
            spec.REJECTED_RECORDS.description,
        )
        self._batch_records = hist(spec.BATCH_RECORDS)
        self._batch_duration = hist(spec.BATCH_DURATION)
        self._commit_duration = hist(spec.SINK_COMMIT_DURATION)

    # -- registration (by the connector hooks) ------------------------------------------

    def add_source(self, step_id: str, topic: str, partition: int, stats: SourceCounters) -> None:
        """Export a source partition's counters (a rebuilt partition replaces its entry)."""
        with self._lock:
            self._sources[(step_id, topic, partition)] = _Source(step_id, topic, partition, stats)

    def source_position(
        self, step_id: str, topic: str, partition: int, next_offset: int, high: int | None
    ) -> None:
        """Note a source partition's next offset and high watermark (for the lag gauges)."""
        entry = self._sources.get((step_id, topic, partition))
        if entry is not None:
            entry.next_offset = next_offset
            if high is not None and high >= 0:
                entry.high = high

    def add_sink(
        self, step_id: str, stats: SinkCounters, committed: Callable[[], Mapping[str, int]]
    ) -> None:
        """Export a sink partition's counters and committed positions (kept after close)."""
        with self._lock:
            self._sinks.append(_Sink(step_id, stats, committed))

    # -- per batch ----------------------------------------------------------------------

    def source_batch(self, step_id: str, records: int, nbytes: int) -> None:
        """Record one batch read by a source."""
        self._batch_records.record(records, {"step_id": step_id})
        self.window.add(step_id, records, nbytes)

    def step_batch(
        self,
        step_id: str,
        records_in: int,
        records_out: int,
        rejected: Mapping[str, int],
        seconds: float,
        nbytes: int,
    ) -> None:
        """Record one batch through a step: records in and out, rejects, latency."""
        attrs = {"step_id": step_id}
        self._in.add(records_in, attrs)
        self._out.add(records_out, attrs)
        for reason, n in rejected.items():
            self._rejected.add(n, {"step_id": step_id, "reason": reason})
        self._batch_records.record(records_in, attrs)
        self._batch_duration.record(seconds, attrs)
        self.window.add(step_id, records_in, nbytes)

    def sink_commit(self, step_id: str, seconds: float) -> None:
        """Record one epoch commit of a sink partition."""
        self._commit_duration.record(seconds, {"step_id": step_id})

    # -- read at collection ---------------------------------------------------------------

    def _source_list(self) -> list[_Source]:
        with self._lock:
            return list(self._sources.values())

    def _sink_list(self) -> list[_Sink]:
        with self._lock:
            return list(self._sinks)

    def _source_counter(self, attr: str) -> Iterable[Observation]:
        for s in self._source_list():
            yield Observation(getattr(s.stats, attr), _attrs(s.step_id, s.topic, s.partition))

    def _sink_counter(self, attr: str) -> Iterable[Observation]:
        # Partitions of one sink (and rebuilt ones) share a step id: sum them, so the
        # series only grows.
        sums: dict[str, int] = {}
        for s in self._sink_list():
            sums[s.step_id] = sums.get(s.step_id, 0) + getattr(s.stats, attr)
        for step_id, n in sums.items():
            yield Observation(n, {"step_id": step_id})

    def _consumer_lag(self) -> Iterable[Observation]:
        for s in self._source_list():
            if s.high is not None and s.next_offset is not None:
                lag = max(0, s.high - s.next_offset)
                yield Observation(lag, _attrs(s.step_id, s.topic, s.partition))

    def _coverage_lag(self) -> Iterable[Observation]:
        highs = {
            f"{s.topic}:{s.partition}": s.high for s in self._source_list() if s.high is not None
        }
        lags: dict[tuple[str, str], int] = {}
        for sink in self._sink_list():
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

    # -- /stats ---------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counters and the rolling per-stage digest, as JSON-ready data."""
        sources = {
            f"{s.topic}:{s.partition}": {
                "step_id": s.step_id,
                "records": s.stats.records,
                "bytes": s.stats.bytes,
                "batches": s.stats.batches,
                "transient_errors": s.stats.transient_errors,
                "next_offset": s.next_offset,
                "high_watermark": s.high,
            }
            for s in self._source_list()
        }
        sinks: dict[str, dict[str, int]] = {}
        for sink in self._sink_list():
            acc = sinks.setdefault(
                sink.step_id, {"rows_written": 0, "rows_skipped_replay": 0, "epochs_committed": 0}
            )
            acc["rows_written"] += sink.stats.rows_written
            acc["rows_skipped_replay"] += sink.stats.rows_skipped_replay
            acc["epochs_committed"] += sink.stats.epochs_committed
        return {
            "window_seconds": self.window.seconds,
            "stages": self.window.digest(),
            "sources": sources,
            "sinks": sinks,
        }


_metrics: Metrics | None = None
_metrics_lock = threading.Lock()


def enable_metrics(*, prometheus: bool = True, readers: Sequence[MetricReader] = ()) -> Metrics:
    """Create the process's metrics once (later calls return the same object).

    Args:
        prometheus: Export into ``prometheus_client``'s global registry.
        readers: Further readers (e.g. an OTLP ``PeriodicExportingMetricReader``).
    """
    global _metrics
    with _metrics_lock:
        if _metrics is None:
            all_readers = list(readers)
            if prometheus:
                all_readers.insert(0, PrometheusMetricReader(disable_target_info=True))
            _metrics = Metrics(all_readers)
        return _metrics


def metrics() -> Metrics | None:
    """The process's metrics, or None until :func:`enable_metrics`."""
    return _metrics
