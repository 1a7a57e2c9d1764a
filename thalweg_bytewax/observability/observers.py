"""The observers connectors, sinks and steps hold: counters, health, a span per batch.

:class:`SourceObserver` (a source partition), :class:`SinkObserver` (an epoch sink
partition) and :class:`StepBatch` (one batch through a step) are built by the
``observe_*`` functions of :mod:`.gate` once :func:`~.hooks.observe` turned the hooks on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from opentelemetry.trace import Span

from thalweg_bytewax.errors import ThalwegError
from thalweg_bytewax.lanes.dlq import DLQ_REASON

from . import tracing
from .health import Component, registry
from .meters import Metrics, SinkCounters, SourceCounters, metrics

__all__ = [
    "REJECT_DEGRADED_FRACTION",
    "SinkObserver",
    "SourceObserver",
    "StepBatch",
    "forget_steps",
]

REJECT_DEGRADED_FRACTION = 0.5
"""A step whose last batch rejected more than this share of its records is degraded."""

_steps: dict[str, Component] = {}


def forget_steps() -> None:
    """Forget every step's health component (the health tree was cleared)."""
    _steps.clear()


def _describe(exc: BaseException) -> str:
    # Our errors are written to be shown (secrets redacted, rule 8); a client library's
    # text may hold a URL or a credential, so only its type is shown.
    if isinstance(exc, ThalwegError):
        return str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
    return f"{type(exc).__name__} (see the flow's log)"


class SourceObserver:
    """The hooks of one source partition: counters, lag, health, a span per batch."""

    __slots__ = (
        "_bytes_seen",
        "_m",
        "_watermarks",
        "headers",
        "health",
        "partition",
        "stats",
        "step_id",
        "topic",
    )

    def __init__(
        self,
        step_id: str,
        topic: str,
        partition: int,
        stats: SourceCounters,
        *,
        headers_column: str,
        watermarks: Callable[[], tuple[int, int]],
    ) -> None:
        self.step_id = step_id
        self.topic = topic
        self.partition = partition
        self.stats = stats
        self.headers = headers_column
        self._watermarks = watermarks
        # The source sizes each batch for its own counter: its increase is the poll's bytes.
        self._bytes_seen = stats.bytes
        self._m: Metrics | None = metrics()
        if self._m is not None:
            self._m.add_source(step_id, topic, partition, stats)
        self.health = registry.register(
            "source", f"{topic}:{partition}", critical=True, numbers=self._numbers
        )

    def _numbers(self) -> dict[str, Any]:
        return {
            "records": self.stats.records,
            "batches": self.stats.batches,
            "transient_errors": self.stats.transient_errors,
        }

    def polled(
        self, out: list[tuple[str, pa.RecordBatch]], *, next_offset: int, degraded: bool
    ) -> list[tuple[str, pa.RecordBatch]]:
        """After a poll: note the position, set the health, trace and count the batches."""
        m = self._m
        if m is not None:
            try:
                high: int | None = self._watermarks()[1]  # librdkafka's cache, no request
            except Exception:
                high = None
            m.source_position(self.step_id, self.topic, self.partition, next_offset, high)
        if degraded:
            if self.health.status == "ok":
                self.health.degraded("transient broker or client errors; backing off")
        else:
            self.health.ok()
        if not out:
            return out
        if m is not None:
            total = self.stats.bytes
            sizes = [batch.num_rows for _, batch in out]
            m.source_batches(
                self.step_id, sizes, total - self._bytes_seen, total_records=sum(sizes)
            )
            self._bytes_seen = total
        if tracing.tracer() is None:
            return out
        return [
            (
                key,
                tracing.receive_span(
                    batch,
                    batch.column(self.headers),
                    step_id=self.step_id,
                    topic=self.topic,
                    partition=self.partition,
                ),
            )
            for key, batch in out
        ]

    def failed(self, exc: BaseException) -> None:
        """The partition raised: it is down (``/ready`` flips)."""
        self.health.down(_describe(exc))

    def finished(self) -> None:
        """A bounded partition reached its end: it stays ``ok`` (and is not lagging)."""
        self.health.ok()


class SinkObserver:
    """The hooks of one sink partition: counters, commit durations, health, write spans."""

    __slots__ = ("_attrs", "_m", "_name", "health", "step_id")

    def __init__(
        self,
        step_id: str,
        name: str,
        stats: SinkCounters,
        committed: Callable[[], Mapping[str, int]],
        *,
        critical: bool,
    ) -> None:
        self.step_id = step_id
        self._name = f"write {step_id}"
        self._attrs = {"thalweg.step_id": step_id}
        self._m = metrics()
        if self._m is not None:
            self._m.add_sink(step_id, stats, committed)

        def numbers() -> dict[str, Any]:
            return {
                "rows_written": stats.rows_written,
                "rows_skipped_replay": stats.rows_skipped_replay,
                "epochs_committed": stats.epochs_committed,
                **stats.own_counters(),
            }

        # Sinks of one class share a component name: each partition gets its own entry.
        self.health = registry.register(
            "sink", name, critical=critical, numbers=numbers, unique=True
        )

    def writing(self, values: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
        """Before a write: a span per traced batch, and the trace metadata removed."""
        if tracing.tracer() is not None:
            for batch in values:
                ctx = tracing.batch_context(batch)
                if ctx is not None:
                    attrs = {**self._attrs, "rows": batch.num_rows}
                    span = tracing.start_batch_span(self._name, ctx, attrs)
                    if span is not None:
                        span.end()
        return [tracing.without_trace(batch) for batch in values]

    def committed(self, seconds: float) -> None:
        """An epoch commit returned after ``seconds``."""
        if self._m is not None:
            self._m.sink_commit(self.step_id, seconds)
        self.health.ok()

    def failed(self, exc: BaseException) -> None:
        """A write or commit failed: the sink partition is down."""
        self.health.down(_describe(exc))


def _step_component(step_id: str) -> Component:
    comp = _steps.get(step_id)
    if comp is None:
        comp = _steps[step_id] = registry.register("step", step_id, critical=False)
    return comp


class StepBatch:
    """One batch through an observed step; :meth:`finish` records it."""

    __slots__ = ("_input", "_nbytes", "_rows", "_span", "_start", "step_id")

    def __init__(self, name: str, step_id: str, batch: pa.RecordBatch) -> None:
        self.step_id = step_id
        self._rows = batch.num_rows
        # The buffers' size: O(columns), where ``nbytes`` walks every value's reach.
        self._nbytes = batch.get_total_buffer_size()
        self._span: Span | None = None
        ctx = tracing.batch_context(batch) if tracing.tracer() is not None else None
        self._input: pa.RecordBatch | None = None
        if ctx is not None:
            self._span = tracing.start_batch_span(
                f"{name} {step_id}",
                ctx,
                {"thalweg.step_id": step_id, "thalweg.batch.records": self._rows},
            )
            if self._span is None:  # not sampled: its context is carried on in finish
                self._input = batch
        self._start = time.perf_counter()

    def finish(
        self, out: pa.RecordBatch | None, rejected: pa.RecordBatch | None
    ) -> pa.RecordBatch | None:
        """Record the batch's outcome; returns ``out`` carrying this step's trace context."""
        seconds = time.perf_counter() - self._start
        reasons: dict[str, int] = {}
        n_rejected = 0
        if rejected is not None and rejected.num_rows:
            n_rejected = rejected.num_rows
            if DLQ_REASON in rejected.schema.names:
                counts = pc.value_counts(rejected.column(DLQ_REASON))
                for item in counts.to_pylist():
                    reasons[str(item["values"])] = int(item["counts"])
            else:
                reasons["unknown"] = n_rejected
        n_out = out.num_rows if out is not None else 0
        m = metrics()
        if m is not None:
            m.step_batch(self.step_id, self._rows, n_out, reasons, seconds, self._nbytes)
        comp = _step_component(self.step_id)
        if self._rows and n_rejected > REJECT_DEGRADED_FRACTION * self._rows:
            comp.degraded(f"rejected {n_rejected} of {self._rows} records of the last batch")
        else:
            comp.ok()
        span = self._span
        if span is not None:
            span.set_attribute("thalweg.records_out", n_out)
            span.set_attribute("thalweg.records_rejected", n_rejected)
            span.end()
            if out is not None:
                out = tracing.stamp(out, span)
        elif out is not None and self._input is not None:
            # Not sampled: the upstream context (and its decision) travels on, no span.
            out = tracing.carry(out, self._input)
            self._input = None
        return out
