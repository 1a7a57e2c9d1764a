"""A batch's W3C trace context in its Arrow schema metadata, parsed once per value.

A Python context cannot ride along an Arrow batch between Bytewax steps, so the batch's
schema metadata carries it (:data:`TRACEPARENT_KEY`, and :data:`TRACESTATE_KEY` when
set). :func:`stamp` writes a span's context there, :func:`carry` moves it to a batch
built from another, :func:`without_trace` removes it (what a sink writes) and
:func:`batch_context` reads it. The contexts of recently seen values are kept parsed
(:data:`CONTEXT_CACHE_SIZE`), and :func:`stamp` enters the value it writes, so the next
step and every sink find it without parsing. None of this needs tracing on;
:mod:`.tracing` decides when a span is made.
"""

from __future__ import annotations

import pyarrow as pa
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .headers import TRACEPARENT_HEADER, KafkaHeadersGetter

__all__ = [
    "CONTEXT_CACHE_SIZE",
    "TRACEPARENT_KEY",
    "TRACESTATE_KEY",
    "batch_context",
    "carry",
    "forget_contexts",
    "stamp",
    "without_trace",
]

TRACEPARENT_KEY = b"thalweg.traceparent"
"""The schema metadata key carrying a batch's W3C ``traceparent``."""
TRACESTATE_KEY = b"thalweg.tracestate"
"""The schema metadata key carrying a batch's W3C ``tracestate``, when it has one."""
CONTEXT_CACHE_SIZE = 256
"""Most batch-metadata trace contexts kept parsed (cleared whole when full)."""

_W3C = TraceContextTextMapPropagator()
_GETTER = KafkaHeadersGetter()
_contexts: dict[tuple[bytes, bytes | None], Context | None] = {}


def forget_contexts() -> None:
    """Drop every context kept parsed (when tracing is turned on or off)."""
    _contexts.clear()


def _remember(key: tuple[bytes, bytes | None], ctx: Context | None) -> None:
    # Plain dict operations (atomic under the GIL): no lock on the per-batch path.
    if len(_contexts) >= CONTEXT_CACHE_SIZE:
        _contexts.clear()
    _contexts[key] = ctx


def _context_of_metadata(meta: dict[bytes, bytes] | None) -> Context | None:
    if not meta:
        return None
    parent = meta.get(TRACEPARENT_KEY)
    if parent is None:
        return None
    state = meta.get(TRACESTATE_KEY)
    key = (parent, state)
    try:
        return _contexts[key]
    except KeyError:
        pass
    carrier = [(TRACEPARENT_HEADER, parent)]
    if state is not None:
        carrier.append(("tracestate", state))
    ctx: Context | None = _W3C.extract(carrier, getter=_GETTER)
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        ctx = None
    _remember(key, ctx)
    return ctx


def batch_context(batch: pa.RecordBatch) -> Context | None:
    """The trace context a batch carries in its schema metadata, or None."""
    return _context_of_metadata(batch.schema.metadata)


def _traceparent(sc: SpanContext) -> bytes:
    return f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{sc.trace_flags:02x}".encode()


def stamp(batch: pa.RecordBatch, span: Span) -> pa.RecordBatch:
    """``batch`` carrying ``span``'s context in its schema metadata (no data copied).

    The written value's context is remembered, so that :func:`batch_context` on the
    stamped batch (the next step, every sink) parses nothing.
    """
    sc = span.get_span_context()
    if not sc.is_valid:
        return batch
    parent = _traceparent(sc)
    state = sc.trace_state.to_header().encode() if sc.trace_state else None
    meta = {
        k: v
        for k, v in (batch.schema.metadata or {}).items()
        if k not in (TRACEPARENT_KEY, TRACESTATE_KEY)
    }
    meta[TRACEPARENT_KEY] = parent
    if state is not None:
        meta[TRACESTATE_KEY] = state
    # As extracted from the metadata: a remote parent, so the sampler decides alike.
    remote = SpanContext(sc.trace_id, sc.span_id, True, sc.trace_flags, sc.trace_state)
    _remember((parent, state), trace.set_span_in_context(NonRecordingSpan(remote)))
    return batch.replace_schema_metadata(meta)


def carry(out: pa.RecordBatch, source: pa.RecordBatch) -> pa.RecordBatch:
    """``out`` carrying the trace metadata of ``source`` (when it lost it, e.g. decoded).

    For a batch whose span was not sampled: the upstream context (and its decision)
    travels on without a span of this step.
    """
    meta = source.schema.metadata
    if not meta or TRACEPARENT_KEY not in meta:
        return out
    have = out.schema.metadata or {}
    if have.get(TRACEPARENT_KEY) == meta[TRACEPARENT_KEY]:
        return out
    merged = {k: v for k, v in have.items() if k not in (TRACEPARENT_KEY, TRACESTATE_KEY)}
    merged.update({k: v for k, v in meta.items() if k in (TRACEPARENT_KEY, TRACESTATE_KEY)})
    return out.replace_schema_metadata(merged)


def without_trace(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` without trace metadata (what a sink writes)."""
    meta = batch.schema.metadata
    if not meta or (TRACEPARENT_KEY not in meta and TRACESTATE_KEY not in meta):
        return batch
    rest = {k: v for k, v in meta.items() if k not in (TRACEPARENT_KEY, TRACESTATE_KEY)}
    return batch.replace_schema_metadata(rest or None)
