"""The hooks connectors and operators call, and :func:`observe`, which turns them on.

Observability is opt-in and off by default (so the test suite starts no server and
pays nothing): until :func:`observe` runs — or ``THALWEG_HTTP_PORT`` is set when the
first partition is built — every ``observe_*`` function of :mod:`.gate` returns None
and the caller skips its hook with one ``is None`` check.

- A Kafka source partition (``connectors/kafka/_partition.py``) registers a
  :class:`SourceObserver`: its counters are exported, it is a readiness-critical
  component of the health tree (down when the partition fails, degraded while it backs
  off from transient errors), and each polled batch gets a ``receive`` span continuing
  the trace context found in the records' headers.
- An epoch sink partition (``runtime/epoch_sink.py``) registers a :class:`SinkObserver`:
  its counters, commit durations and health (down when a write or commit fails); the
  primary raw lane is readiness-critical.
- A step (decode, validate) wraps each batch in :func:`.gate.observe_step`: records in, out
  and rejected by reason, latency, batch size, a child span, and a ``degraded`` status
  while a batch's reject rate is high (display only: a DLQ spike never drops readiness).
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.trace import Span, TracerProvider

from thalweg_bytewax.errors import ConfigError, ThalwegError
from thalweg_bytewax.lanes.dlq import DLQ_REASON

from . import gate, tracing
from .gate import HTTP_HOST_ENV, HTTP_PORT_ENV
from .health import Component, registry
from .metrics import Metrics, SinkCounters, SourceCounters, enable_metrics, metrics
from .server import ObservabilityServer, serve

__all__ = [
    "REJECT_DEGRADED_FRACTION",
    "SinkObserver",
    "SourceObserver",
    "StepBatch",
    "observe",
    "reset",
    "running_server",
]

logger = logging.getLogger(__name__)

REJECT_DEGRADED_FRACTION = 0.5
"""A step whose last batch rejected more than this share of its records is degraded."""

T = TypeVar("T")
"""Whatever :func:`observe` is given back (a Dataflow, typically)."""

_lock = threading.Lock()
_server: ObservabilityServer | None = None
_steps: dict[str, Component] = {}
_gc_frozen = False


def observe(
    flow: T | None = None,
    *,
    port: int | None = None,
    host: str | None = None,
    metrics: bool = True,
    tracing_provider: TracerProvider | None = None,
    metric_readers: tuple[MetricReader, ...] = (),
    freeze_gc: bool = False,
) -> T | None:
    """Turn metrics, traces and health on for the partitions this process builds.

    Call it before running the flow (``flow = observe(build_flow(...))``). The HTTP
    server (``/health``, ``/ready``, ``/live``, ``/stats``, ``/metrics``) starts only when
    a port is given here or in ``THALWEG_HTTP_PORT``; it binds ``127.0.0.1`` unless
    ``host`` or ``THALWEG_HTTP_HOST`` says otherwise. Traces are recorded when
    ``tracing_provider`` is given, a flow's configuration armed OTLP export
    (:func:`.otlp.arm`: its exporters are made here, its tracer provider used unless
    one is given) or a global OpenTelemetry tracer provider is set. Calling it again
    is harmless (the first server stays; metric readers count on the first call only).

    With ``freeze_gc=True`` the first such call also moves every object the process
    tracks at that moment — the OpenTelemetry SDK and server modules it imported, the
    providers and instruments, and what was built before it (the flow's modules) — into
    the garbage collector's permanent generation (:func:`gc.freeze`), once per process:
    they live as long as the process, so no later full collection walks them again.
    Reference counting still frees them; only a reference cycle that is garbage already
    at that moment is kept. It is off by default: the collector is the whole process's,
    and the application that owns it decides (docs/operations.md).

    Args:
        flow: Returned unchanged, for chaining.
        port: The server's port (``0``: any free port, see :func:`running_server`).
        host: The interface to bind.
        metrics: Export metrics (into ``prometheus_client``'s registry).
        tracing_provider: The tracer provider for batch spans.
        metric_readers: Further OpenTelemetry metric readers (OTLP, in-memory).
        freeze_gc: Freeze the objects alive at this call (:func:`gc.freeze`, once per
            process); ``False`` (the default) leaves the garbage collector as it is.

    Returns:
        ``flow``.

    Raises:
        ConfigError: When ``THALWEG_HTTP_PORT`` is not a port number.
    """
    global _server, _gc_frozen
    with _lock:
        resource = None
        export = gate.take_armed()
        if export is not None:
            from .metrics import metrics as current_metrics  # noqa: PLC0415 - `metrics` is an arg
            from .otlp import exporters  # noqa: PLC0415 - the OTLP extra only when armed

            otlp_provider, otlp_readers, resource = exporters(
                export, tracing=tracing_provider is None
            )
            if tracing_provider is None:
                tracing_provider = otlp_provider
            if otlp_readers and current_metrics() is not None:
                logger.warning(
                    "observability: metrics were turned on in this process before the "
                    "OTLP configuration was applied; its metrics are not exported over "
                    "OTLP (traces are); build the flow before calling observe()"
                )
            metric_readers = (*metric_readers, *otlp_readers)
        if metrics:
            enable_metrics(readers=metric_readers, resource=resource)
        provider = tracing_provider if tracing_provider is not None else trace.get_tracer_provider()
        if not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            tracing.enable_tracing(provider)
        gate.set_on(True)
        if port is None and (env := os.environ.get(HTTP_PORT_ENV)):
            try:
                port = int(env)
            except ValueError:
                msg = (
                    f"observability: `{HTTP_PORT_ENV}` expected a port number; got {env!r}; "
                    "set it to a free port, or 0 for any"
                )
                raise ConfigError(msg) from None
        if port is not None and _server is None:
            bind = host or os.environ.get(HTTP_HOST_ENV) or "127.0.0.1"
            _server = serve(port=port, host=bind)
        if freeze_gc and not _gc_frozen:
            # After the SDK's imports and the providers: what is alive now stays alive.
            gc.freeze()
            _gc_frozen = True
    return flow


def running_server() -> ObservabilityServer | None:
    """The server :func:`observe` started, or None (its ``port`` is the bound one)."""
    return _server


def reset() -> None:
    """Turn the hooks off, stop the server and forget the health tree (tests, reruns).

    The metrics provider stays (one per process); its counters keep their values.
    """
    global _server
    with _lock:
        gate.set_on(False)
        tracing.disable_tracing()
        if _server is not None:
            _server.close()
            _server = None
        registry.clear()
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
