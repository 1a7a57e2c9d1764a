"""W3C trace context through Kafka headers and Arrow batches, one span per batch.

The default propagator getter reads dict-like carriers; Kafka headers are an ordered
list of ``(str, bytes | None)`` pairs with duplicate keys, so :class:`KafkaHeadersGetter`
and :class:`KafkaHeadersSetter` adapt them.

**Sampling and granularity.** Spans are per batch, never per record: the source starts
one ``receive`` span per polled batch, parented to the trace context of the *first*
record in the batch that carries a ``traceparent`` header (so an upstream trace id
continues), and *linked* to the distinct contexts of up to :data:`MAX_LINKS` other
records. The provider's sampler decides the rest (``ParentBased`` by default, so an
upstream sampled flag is honoured).

**Carrying the context through Bytewax steps.** A Python context cannot ride along an
Arrow batch between steps, so the batch's *schema metadata* carries it
(:data:`TRACEPARENT_KEY`, and :data:`TRACESTATE_KEY` when set). pyarrow keeps schema
metadata through ``filter`` / ``take`` / ``slice`` / ``select``; a step that builds a new
batch continues it with :func:`stamp`. Each observed step (decode, validate) opens a
child span and re-stamps its output, so the sink's span is a child of the last step;
:func:`inject_headers` gives a Kafka producer the headers continuing the trace across
the broker.

Tracing is on only after :func:`enable_tracing` (``observe()`` does it): until then
every function here is a no-op that returns its input.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableSequence, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import Link, Span, SpanKind, Tracer, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "MAX_LINKS",
    "TRACEPARENT_HEADER",
    "TRACEPARENT_KEY",
    "TRACESTATE_KEY",
    "KafkaHeaders",
    "KafkaHeadersGetter",
    "KafkaHeadersSetter",
    "batch_context",
    "disable_tracing",
    "enable_tracing",
    "extract_headers",
    "inject_headers",
    "receive_span",
    "stamp",
    "step_span",
    "tracer",
    "without_trace",
]

KafkaHeaders = Sequence[tuple[str, bytes | None]]
"""Kafka record headers as confluent-kafka returns them: ordered, duplicates allowed."""

TRACEPARENT_HEADER = "traceparent"
"""The W3C header name (Kafka header keys are matched exactly, lowercase)."""
TRACEPARENT_KEY = b"thalweg.traceparent"
"""The schema metadata key carrying a batch's W3C ``traceparent``."""
TRACESTATE_KEY = b"thalweg.tracestate"
"""The schema metadata key carrying a batch's W3C ``tracestate``, when it has one."""
MAX_LINKS = 16
"""Most records' contexts a batch span links to (beyond its parent): bounded per batch."""

_W3C = TraceContextTextMapPropagator()
_TRACER_NAME = "thalweg_bytewax"
_tracer: Tracer | None = None


class KafkaHeadersGetter(Getter[KafkaHeaders]):
    """Reads a propagation field from Kafka headers (the last value of a repeated key)."""

    def get(self, carrier: KafkaHeaders, key: str) -> list[str] | None:
        """The values of ``key``, decoded as UTF-8 (null values skipped), or None."""
        found = [
            v.decode("utf-8", "replace") for k, v in carrier or () if k == key and v is not None
        ]
        # W3C: a repeated traceparent is invalid; the last one is the producer's latest.
        return found[-1:] or None

    def keys(self, carrier: KafkaHeaders) -> list[str]:
        """Every header key, in order."""
        return [k for k, _ in carrier or ()]


class KafkaHeadersSetter(Setter[MutableSequence[tuple[str, bytes]]]):
    """Writes a propagation field into a mutable list of Kafka headers, replacing it."""

    def set(self, carrier: MutableSequence[tuple[str, bytes]], key: str, value: str) -> None:
        """Drop any previous ``key`` and append ``(key, value.encode())``."""
        carrier[:] = [(k, v) for k, v in carrier if k != key]
        carrier.append((key, value.encode()))


_GETTER = KafkaHeadersGetter()
_SETTER = KafkaHeadersSetter()


def enable_tracing(provider: TracerProvider | None = None) -> None:
    """Turn batch spans on, with ``provider`` or the global OpenTelemetry provider."""
    global _tracer
    source = provider if provider is not None else trace.get_tracer_provider()
    _tracer = source.get_tracer(_TRACER_NAME)


def disable_tracing() -> None:
    """Turn batch spans off (every function here returns its input again)."""
    global _tracer
    _tracer = None


def tracer() -> Tracer | None:
    """The tracer in use, or None while tracing is off."""
    return _tracer


def extract_headers(headers: KafkaHeaders) -> Context:
    """The trace context carried by one record's Kafka headers (empty if none)."""
    return _W3C.extract(headers, getter=_GETTER)


def _context_of_metadata(meta: dict[bytes, bytes] | None) -> Context | None:
    if not meta or TRACEPARENT_KEY not in meta:
        return None
    carrier = [(TRACEPARENT_HEADER, meta[TRACEPARENT_KEY])]
    if TRACESTATE_KEY in meta:
        carrier.append(("tracestate", meta[TRACESTATE_KEY]))
    ctx = _W3C.extract(carrier, getter=_GETTER)
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def batch_context(batch: pa.RecordBatch) -> Context | None:
    """The trace context a batch carries in its schema metadata, or None."""
    return _context_of_metadata(batch.schema.metadata)


def stamp(batch: pa.RecordBatch, span: Span) -> pa.RecordBatch:
    """``batch`` carrying ``span``'s context in its schema metadata (no data copied)."""
    carrier: list[tuple[str, bytes]] = []
    _W3C.inject(carrier, context=trace.set_span_in_context(span), setter=_SETTER)
    if not carrier:
        return batch
    meta = {k: v for k, v in (batch.schema.metadata or {}).items() if k != TRACESTATE_KEY}
    for k, v in carrier:
        meta[TRACEPARENT_KEY if k == TRACEPARENT_HEADER else TRACESTATE_KEY] = v
    return batch.replace_schema_metadata(meta)


def without_trace(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` without trace metadata (what a sink writes)."""
    meta = batch.schema.metadata
    if not meta or (TRACEPARENT_KEY not in meta and TRACESTATE_KEY not in meta):
        return batch
    rest = {k: v for k, v in meta.items() if k not in (TRACEPARENT_KEY, TRACESTATE_KEY)}
    return batch.replace_schema_metadata(rest or None)


def _record_contexts(headers: pa.Array) -> list[Context]:
    """The distinct trace contexts of the records of a headers column, in row order.

    Columnar: the flattened header keys are compared at once; only the matching values
    (at most ``MAX_LINKS + 1`` distinct ones) are turned into Python objects.
    """
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if len(headers) == 0 or headers.null_count == len(headers):
        return []
    flat = pc.list_flatten(headers)
    if len(flat) == 0:
        return []
    hits = pc.indices_nonzero(pc.fill_null(pc.equal(flat.field("key"), TRACEPARENT_HEADER), False))
    if len(hits) == 0:
        return []
    values = flat.field("value").take(hits)
    seen: set[bytes] = set()
    out: list[Context] = []
    # Duplicates are common (one producer span per batch upstream): look a bit further.
    for v in values.slice(0, 16 * MAX_LINKS).to_pylist():
        if v is None or v in seen:
            continue
        seen.add(v)
        ctx = extract_headers([(TRACEPARENT_HEADER, v)])
        if trace.get_current_span(ctx).get_span_context().is_valid:
            out.append(ctx)
        if len(out) > MAX_LINKS:
            break
    return out


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
    unchanged while tracing is off.
    """
    t = _tracer
    if t is None:
        return batch
    contexts = _record_contexts(headers)
    parent = contexts[0] if contexts else None
    links = [Link(trace.get_current_span(c).get_span_context()) for c in contexts[1:]]
    attrs: dict[str, Any] = {
        "messaging.system": "kafka",
        "messaging.operation.type": "receive",
        "messaging.destination.name": topic,
        "messaging.destination.partition.id": str(partition),
        "messaging.batch.message_count": batch.num_rows,
        "thalweg.step_id": step_id,
    }
    span = t.start_span(
        f"receive {topic}", context=parent, kind=SpanKind.CONSUMER, links=links, attributes=attrs
    )
    span.end()
    return stamp(batch, span)


@contextmanager
def step_span(name: str, step_id: str, batch: pa.RecordBatch) -> Iterator[Span | None]:
    """A span for one step's work on one batch, child of the batch's context.

    Yields None (and starts nothing) while tracing is off or when the batch carries no
    context, so untraced batches cost one dictionary lookup.
    """
    t = _tracer
    ctx = batch_context(batch) if t is not None else None
    if t is None or ctx is None:
        yield None
        return
    attrs = {"thalweg.step_id": step_id, "thalweg.batch.records": batch.num_rows}
    with t.start_as_current_span(
        f"{name} {step_id}", context=ctx, attributes=attrs, end_on_exit=True
    ) as span:
        yield span


def inject_headers(
    batch: pa.RecordBatch, *, topic: str | None = None, step_id: str = "kafka sink"
) -> list[tuple[str, bytes]]:
    """The Kafka headers that continue a batch's trace across the broker.

    For a Kafka producer: add the returned headers to every record produced from
    ``batch``. When the batch carries a trace context (and tracing is on), a
    ``PRODUCER`` span ``send <topic>`` is started and ended as its child, and the
    headers carry that span's context; otherwise the list is empty.

    Args:
        batch: The batch being produced.
        topic: The destination topic (span name and attribute).
        step_id: The producing step's id (span attribute).

    Returns:
        ``[("traceparent", b"00-…")]`` (plus ``tracestate``), or ``[]``.
    """
    t = _tracer
    if t is None:
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
    span = t.start_span(
        f"send {topic or step_id}", context=ctx, kind=SpanKind.PRODUCER, attributes=attrs
    )
    span.end()
    headers: list[tuple[str, bytes]] = []
    _W3C.inject(headers, context=trace.set_span_in_context(span), setter=_SETTER)
    return headers
