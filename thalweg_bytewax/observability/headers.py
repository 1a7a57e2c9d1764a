"""W3C trace context in Kafka headers.

The default propagator getter reads dict-like carriers; Kafka headers are an ordered
list of ``(str, bytes | None)`` pairs with duplicate keys, so :class:`KafkaHeadersGetter`
and :class:`KafkaHeadersSetter` adapt them. :func:`record_contexts` reads the contexts
of a whole RawBatch headers column at once (the source's batch span parents on the first
and links the others), parsing each distinct value with :func:`parse_traceparent`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, MutableSequence, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "TRACEPARENT_HEADER",
    "KafkaHeaders",
    "KafkaHeadersGetter",
    "KafkaHeadersSetter",
    "extract_headers",
    "parse_traceparent",
    "record_contexts",
]

KafkaHeaders = Sequence[tuple[str, bytes | None]]
"""Kafka record headers as confluent-kafka returns them: ordered, duplicates allowed."""

TRACEPARENT_HEADER = "traceparent"
"""The W3C header name (Kafka header keys are matched exactly, lowercase)."""

_W3C = TraceContextTextMapPropagator()
# The propagator's pattern (``$`` there also matches before a final newline).
_TRACEPARENT = re.compile(
    rb"[ \t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:(-.*)|[ \t]*)\n?"
)
_TRACEPARENT_MAX = 512
_ZERO_TRACE = b"0" * 32
_ZERO_SPAN = b"0" * 16


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


def extract_headers(headers: KafkaHeaders) -> Context:
    """The trace context carried by one record's Kafka headers (empty if none)."""
    return _W3C.extract(headers, getter=_GETTER)


def record_contexts(headers: pa.Array, *, scan: int) -> Iterator[Context]:
    """The distinct trace contexts of the records of a headers column, in row order.

    Columnar: the flattened header keys are compared at once; only the first ``scan``
    matching values are turned into Python objects, and each context is parsed when it
    is asked for (a caller that stops after the first parses one).
    """
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if len(headers) == 0 or headers.null_count == len(headers):
        return
    flat = pc.list_flatten(headers)
    if len(flat) == 0:
        return
    hits = pc.indices_nonzero(pc.fill_null(pc.equal(flat.field("key"), TRACEPARENT_HEADER), False))
    if len(hits) == 0:
        return
    values = flat.field("value").take(hits.slice(0, scan))
    seen: set[bytes] = set()
    for v in values.to_pylist():
        if v is None or v in seen:
            continue
        seen.add(v)
        sc = parse_traceparent(v)
        if sc is not None:
            yield trace.set_span_in_context(NonRecordingSpan(sc))


def parse_traceparent(value: bytes) -> SpanContext | None:
    """The remote span context of one W3C ``traceparent`` value, or None if invalid.

    The rules of OpenTelemetry's ``TraceContextTextMapPropagator.extract`` (at most 512
    characters; version ``ff``, an all-zero trace or span id, or a version ``00`` value
    with a suffix are invalid), without a carrier, a getter and a Context per value.
    """
    if len(value) > _TRACEPARENT_MAX and len(value.decode("utf-8", "replace")) > _TRACEPARENT_MAX:
        return None
    m = _TRACEPARENT.fullmatch(value)
    if m is None:
        return None
    version, trace_id, span_id, flags, rest = m.groups()
    if version == b"ff" or (version == b"00" and rest) or trace_id == _ZERO_TRACE:
        return None
    if span_id == _ZERO_SPAN:
        return None
    return SpanContext(int(trace_id, 16), int(span_id, 16), True, TraceFlags(int(flags, 16)))
