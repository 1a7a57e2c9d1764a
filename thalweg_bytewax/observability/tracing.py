"""W3C trace context through Kafka headers and Arrow batches, one span per batch.

Kafka headers are read and written through :mod:`.headers`' getter and setter.

**Sampling and granularity.** Spans are per batch, never per record: the source starts
one ``receive`` span per polled batch, parented to the trace context of the *first*
record in the batch that carries a ``traceparent`` header (so an upstream trace id
continues), and *linked* to the distinct contexts of up to :data:`MAX_LINKS` other
records. The provider's sampler decides the rest (``ParentBased`` by default, so an
upstream sampled flag is honoured), and it is asked *before* a span is made: with a
sampler of the SDK (static, ``TraceIdRatioBased``, ``ParentBased`` of those), a batch
whose span it would drop gets none — no span object, no attributes, no context written.
A batch without any trace context whose root span is not sampled stays unstamped, so
nothing downstream pays for it; one whose upstream context is not sampled carries that
context on unchanged (so a producer further down keeps the decision) and no step opens
a span for it.

**Carrying the context through Bytewax steps.** A Python context cannot ride along an
Arrow batch between steps, so the batch's *schema metadata* carries it
(:data:`TRACEPARENT_KEY`, and :data:`TRACESTATE_KEY` when set; :mod:`._batch_context`
reads and writes it). pyarrow keeps schema
metadata through ``filter`` / ``take`` / ``slice`` / ``select``; a step that builds a new
batch continues it with :func:`stamp`. Each observed step (decode, validate) opens a
child span and re-stamps its output, so the sink's span is a child of the last step;
:func:`inject_headers` gives a Kafka producer the headers continuing the trace across
the broker. Reading a batch's context parses its ``traceparent`` once: the contexts of
recently seen values are kept (:data:`CONTEXT_CACHE_SIZE`), and :func:`stamp` enters the
value it writes, so the next step and every sink find it without parsing.

Tracing is on only after :func:`enable_tracing` (``observe()`` does it): until then
every function here is a no-op that returns its input.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import (
    Decision,
    ParentBased,
    Sampler,
    StaticSampler,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, Span, SpanKind, Tracer, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes

from ._batch_context import (
    CONTEXT_CACHE_SIZE,
    TRACEPARENT_KEY,
    TRACESTATE_KEY,
    batch_context,
    carry,
    forget_contexts,
    stamp,
    without_trace,
)
from .headers import KafkaHeadersSetter, record_contexts

__all__ = [
    "CONTEXT_CACHE_SIZE",
    "MAX_LINKS",
    "TRACEPARENT_KEY",
    "TRACESTATE_KEY",
    "batch_context",
    "carry",
    "disable_tracing",
    "enable_tracing",
    "inject_headers",
    "receive_span",
    "stamp",
    "start_batch_span",
    "step_span",
    "tracer",
    "without_trace",
]

MAX_LINKS = 16
"""Most records' contexts a batch span links to (beyond its parent): bounded per batch."""

_W3C = TraceContextTextMapPropagator()
_TRACER_NAME = "thalweg_bytewax"
_tracer: Tracer | None = None
_sampler: Sampler | None = None
"""The tracer's sampler when it is a pure function of (parent, trace id), else None."""

_SETTER = KafkaHeadersSetter()


def _pure(sampler: object) -> bool:
    # Samplers of the SDK whose decision depends on the parent and the trace id only, so
    # asking them ahead of the SDK gives its answer (a custom sampler may be random).
    if isinstance(sampler, ParentBased):
        delegates = (
            "_root",
            "_remote_parent_sampled",
            "_remote_parent_not_sampled",
            "_local_parent_sampled",
            "_local_parent_not_sampled",
        )
        return all(_pure(getattr(sampler, name, None)) for name in delegates)
    return isinstance(sampler, StaticSampler | TraceIdRatioBased)


def enable_tracing(provider: TracerProvider | None = None) -> None:
    """Turn batch spans on, with ``provider`` or the global OpenTelemetry provider."""
    global _tracer, _sampler
    source = provider if provider is not None else trace.get_tracer_provider()
    _tracer = source.get_tracer(_TRACER_NAME)
    sampler = getattr(_tracer, "sampler", None)
    _sampler = sampler if _pure(sampler) else None
    forget_contexts()


def disable_tracing() -> None:
    """Turn batch spans off (every function here returns its input again)."""
    global _tracer, _sampler
    _tracer = None
    _sampler = None
    forget_contexts()


def tracer() -> Tracer | None:
    """The tracer in use, or None while tracing is off."""
    return _tracer


def _drops(ctx: Context | None, name: str) -> bool:
    """Whether the sampler certainly drops a span with this parent (asked before making it).

    Exact with a parent (the SDK samples a child with the parent's trace id). For a root,
    the lowest trace id is asked: a ratio sampler takes it unless its rate is 0, so only
    a sampler that never samples roots answers True.
    """
    sampler = _sampler
    if sampler is None:
        return False
    trace_id = trace.get_current_span(ctx).get_span_context().trace_id if ctx is not None else 0
    decision = sampler.should_sample(ctx, trace_id, name).decision
    return decision is Decision.DROP


def start_batch_span(
    name: str,
    ctx: Context | None,
    attributes: Attributes = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    links: Sequence[Link] | None = None,
) -> Span | None:
    """Start a span for one batch's work, child of ``ctx`` (a new trace when None).

    Returns None — and makes nothing — while tracing is off or when the sampler would
    drop the span; a span the SDK made but does not record is ended and None returned.
    """
    t = _tracer
    if t is None or _drops(ctx, name):
        return None
    span = t.start_span(name, context=ctx, kind=kind, links=links, attributes=attributes)
    if not span.is_recording():
        span.end()
        return None
    return span


def receive_span(
    batch: pa.RecordBatch,
    headers: pa.Array,
    *,
    step_id: str,
    topic: str,
    partition: int,
) -> pa.RecordBatch:
    """Start and end the source's span for one polled batch and stamp the batch with it.

    The span (kind ``CONSUMER``, ``receive <topic>``) is a child of the first record
    carrying a ``traceparent`` header and links to up to :data:`MAX_LINKS` other
    distinct record contexts; without any, it starts a new trace. Returns ``batch``
    unchanged while tracing is off, and when the sampler drops a new trace's span. When
    it drops a span whose upstream context is not sampled, the batch carries that
    context on (so the decision travels downstream), with no span made.
    """
    if _tracer is None:
        return batch
    name = f"receive {topic}"
    contexts = record_contexts(headers, scan=16 * (MAX_LINKS + 1))
    parent = next(contexts, None)
    if _drops(parent, name):
        return batch if parent is None else _stamp_context(batch, parent)
    links = [
        Link(trace.get_current_span(c).get_span_context())
        for c in itertools.islice(contexts, MAX_LINKS)
    ]
    attrs: dict[str, Any] = {
        "messaging.system": "kafka",
        "messaging.operation.type": "receive",
        "messaging.destination.name": topic,
        "messaging.destination.partition.id": str(partition),
        "messaging.batch.message_count": batch.num_rows,
        "thalweg.step_id": step_id,
    }
    span = start_batch_span(name, parent, attrs, kind=SpanKind.CONSUMER, links=links)
    if span is None:
        return batch if parent is None else _stamp_context(batch, parent)
    span.end()
    return stamp(batch, span)


def _stamp_context(batch: pa.RecordBatch, ctx: Context) -> pa.RecordBatch:
    return stamp(batch, trace.get_current_span(ctx))


@contextmanager
def step_span(name: str, step_id: str, batch: pa.RecordBatch) -> Iterator[Span | None]:
    """A span for one step's work on one batch, child of the batch's context.

    Yields None (and starts nothing) while tracing is off, when the batch carries no
    context, or when the sampler would drop the span, so untraced batches cost one
    dictionary lookup.
    """
    ctx = batch_context(batch) if _tracer is not None else None
    span = None
    if ctx is not None:
        attrs = {"thalweg.step_id": step_id, "thalweg.batch.records": batch.num_rows}
        span = start_batch_span(f"{name} {step_id}", ctx, attrs)
    if span is None:
        yield None
        return
    with trace.use_span(span, end_on_exit=True):
        yield span


def inject_headers(
    batch: pa.RecordBatch, *, topic: str | None = None, step_id: str = "kafka sink"
) -> list[tuple[str, bytes]]:
    """The Kafka headers that continue a batch's trace across the broker.

    For a Kafka producer: add the returned headers to every record produced from
    ``batch``. When the batch carries a trace context (and tracing is on), a
    ``PRODUCER`` span ``send <topic>`` is started and ended as its child, and the
    headers carry that span's context; when the sampler drops that span, they carry the
    batch's context as it is (not sampled); without a context the list is empty.

    Args:
        batch: The batch being produced.
        topic: The destination topic (span name and attribute).
        step_id: The producing step's id (span attribute).

    Returns:
        ``[("traceparent", b"00-…")]`` (plus ``tracestate``), or ``[]``.
    """
    if _tracer is None:
        return []
    ctx = batch_context(batch)
    if ctx is None:
        return []
    attrs: dict[str, Any] = {
        "messaging.system": "kafka",
        "messaging.operation.type": "send",
        "messaging.batch.message_count": batch.num_rows,
        "thalweg.step_id": step_id,
    }
    if topic is not None:
        attrs["messaging.destination.name"] = topic
    span = start_batch_span(f"send {topic or step_id}", ctx, attrs, kind=SpanKind.PRODUCER)
    if span is not None:
        span.end()
        ctx = trace.set_span_in_context(span)
    headers: list[tuple[str, bytes]] = []
    _W3C.inject(headers, context=ctx, setter=_SETTER)
    return headers
