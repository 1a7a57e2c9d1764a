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
connector hooks and read by observable-instrument callbacks at collection time
(:mod:`._collect` sums them into observations). The
step counters (records in, out, rejected by reason) are plain integers too, kept per
step and per worker thread (each written by one thread only, so no lock and no lost
update) and summed at collection; only the histograms go through the SDK per batch,
with attribute dicts built once per step. The per-batch path takes no lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource

from thalweg_bytewax.runtime.crossings import crossings
from thalweg_bytewax.system.heap_trim import heap_trim_stats
from thalweg_bytewax.system.thread_slots import ThreadSlots

from . import _collect as collect
from . import instruments as spec
from ._collect import SinkCounters, SinkEntry, SourceCounters, SourceEntry, StepCounts
from .window import ThroughputWindow

__all__ = [
    "Metrics",
    "SinkCounters",
    "SourceCounters",
    "enable_metrics",
    "metrics",
]


class Metrics:
    """The instruments of :mod:`.instruments`, on one meter provider, plus what they read.

    Args:
        readers: Metric readers (the Prometheus reader, an OTLP reader, or an in-memory
            one); none makes the instruments record into nothing.
        resource: The resource the readers export with (``service.name``...); default:
            the SDK's, from ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``.
    """

    def __init__(
        self, readers: Sequence[MetricReader] = (), *, resource: Resource | None = None
    ) -> None:
        self._lock = threading.Lock()
        self._sources: dict[tuple[str, str, int], SourceEntry] = {}
        self._sinks: list[SinkEntry] = []
        # Per worker thread: its StepCounts by step id (a thread writes only its own).
        self._steps: ThreadSlots[dict[str, StepCounts]] = ThreadSlots(dict)
        self._step_attrs: dict[str, dict[str, Any]] = {}
        self.window = ThroughputWindow()
        # No exemplars: no batch span is current when a histogram records (so the
        # trace-based default would never keep one), and the filter is asked per record.
        self.provider = MeterProvider(
            metric_readers=list(readers),
            resource=resource,
            exemplar_filter=AlwaysOffExemplarFilter(),
        )
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
            observable(
                s,
                lambda attr=attr: collect.source_counter(self._source_list(), attr),  # type: ignore[misc]
            )
        for s, attr in (
            (spec.SINK_ROWS_WRITTEN, "rows_written"),
            (spec.SINK_ROWS_SKIPPED, "rows_skipped_replay"),
            (spec.SINK_EPOCHS, "epochs_committed"),
        ):
            observable(
                s,
                lambda attr=attr: collect.sink_counter(self._sink_list(), attr),  # type: ignore[misc]
            )
        observable(spec.SINK_COUNTERS, lambda: collect.sink_own_counters(self._sink_list()))
        observable(spec.CONSUMER_LAG, lambda: collect.consumer_lag(self._source_list()))
        observable(
            spec.COVERAGE_LAG, lambda: collect.coverage_lag(self._source_list(), self._sink_list())
        )
        observable(
            spec.STEP_RECORDS_IN, lambda: collect.step_counter(self._step_list(), "records_in")
        )
        observable(
            spec.STEP_RECORDS_OUT, lambda: collect.step_counter(self._step_list(), "records_out")
        )
        observable(spec.REJECTED_RECORDS, lambda: collect.rejected_counter(self._step_list()))
        observable(spec.RULE_WARNINGS, lambda: collect.rule_warning_counter(self._step_list()))
        observable(spec.CROSSING_RECORDS, collect.crossing_counter)
        observable(spec.HEAP_TRIMS, lambda: collect.heap_trim_counter("trims"))
        observable(spec.HEAP_TRIM_RELEASED, lambda: collect.heap_trim_counter("released_bytes"))

        def hist(s: spec.InstrumentSpec) -> Any:
            return meter.create_histogram(
                s.name, s.unit, s.description, explicit_bucket_boundaries_advisory=s.buckets
            )

        self._batch_records = hist(spec.BATCH_RECORDS)
        self._batch_duration = hist(spec.BATCH_DURATION)
        self._commit_duration = hist(spec.SINK_COMMIT_DURATION)

    # -- registration (by the connector hooks) ------------------------------------------

    def add_source(self, step_id: str, topic: str, partition: int, stats: SourceCounters) -> None:
        """Export a source partition's counters (a rebuilt partition replaces its entry)."""
        with self._lock:
            entry = SourceEntry(step_id, topic, partition, stats)
            self._sources[(step_id, topic, partition)] = entry

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
            self._sinks.append(SinkEntry(step_id, stats, committed))

    # -- per batch ----------------------------------------------------------------------

    def _attrs_of(self, step_id: str) -> dict[str, Any]:
        # Built once per step and handed to every record() of it (never mutated).
        attrs = self._step_attrs.get(step_id)
        if attrs is None:
            attrs = self._step_attrs.setdefault(step_id, {"step_id": step_id})
        return attrs

    def _counts(self, step_id: str) -> StepCounts:
        mine = self._steps.get()
        counts = mine.get(step_id)
        if counts is None:
            counts = mine[step_id] = StepCounts(step_id)
        return counts

    def source_batches(
        self, step_id: str, records: Sequence[int], nbytes: int, *, total_records: int
    ) -> None:
        """Record the batches of one poll of a source (``records`` per batch)."""
        attrs = self._attrs_of(step_id)
        for n in records:
            self._batch_records.record(n, attrs)
        self.window.add(step_id, total_records, nbytes, batches=len(records))

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
        counts = self._counts(step_id)
        counts.records_in += records_in
        counts.records_out += records_out
        if rejected:
            by_reason = counts.rejected
            for reason, n in rejected.items():
                by_reason[reason] = by_reason.get(reason, 0) + n
        attrs = self._attrs_of(step_id)
        self._batch_records.record(records_in, attrs)
        self._batch_duration.record(seconds, attrs)
        self.window.add(step_id, records_in, nbytes)

    def rule_warnings(self, step_id: str, failed: Mapping[str, int]) -> None:
        """Add the records a step's reporting rules failed in one batch, by rule id."""
        by_rule = self._counts(step_id).warnings
        for rule_id, n in failed.items():
            by_rule[rule_id] = by_rule.get(rule_id, 0) + n

    def sink_commit(self, step_id: str, seconds: float) -> None:
        """Record one epoch commit of a sink partition."""
        self._commit_duration.record(seconds, self._attrs_of(step_id))

    # -- read at collection ---------------------------------------------------------------

    def _source_list(self) -> list[SourceEntry]:
        with self._lock:
            return list(self._sources.values())

    def _sink_list(self) -> list[SinkEntry]:
        with self._lock:
            return list(self._sinks)

    def _step_list(self) -> list[StepCounts]:
        return [c for mine in self._steps.values() for c in list(mine.values())]

    # -- /stats ---------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counters and the rolling per-stage digest, as JSON-ready data."""
        return {
            "window_seconds": self.window.seconds,
            "stages": self.window.digest(),
            **collect.stats(self._source_list(), self._sink_list()),
            "crossings": crossings().as_dict(),
            "heap_trim": asdict(heap_trim_stats()),
        }


_metrics: Metrics | None = None
_metrics_lock = threading.Lock()


def enable_metrics(
    *,
    prometheus: bool = True,
    readers: Sequence[MetricReader] = (),
    resource: Resource | None = None,
) -> Metrics:
    """Create the process's metrics once (later calls return the same object).

    Args:
        prometheus: Export into ``prometheus_client``'s global registry.
        readers: Further readers (e.g. an OTLP ``PeriodicExportingMetricReader``); a
            later call's readers are not added (one meter provider per process).
        resource: The resource the readers export with (the first call's is kept).
    """
    global _metrics
    with _metrics_lock:
        if _metrics is None:
            all_readers = list(readers)
            if prometheus:
                all_readers.insert(0, PrometheusMetricReader(disable_target_info=True))
            _metrics = Metrics(all_readers, resource=resource)
        return _metrics


def metrics() -> Metrics | None:
    """The process's metrics, or None until :func:`enable_metrics`."""
    return _metrics
