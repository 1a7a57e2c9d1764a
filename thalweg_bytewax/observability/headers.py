"""W3C trace context in Kafka headers.

The default propagator getter reads dict-like carriers; Kafka headers are an ordered
list of ``(str, bytes | None)`` pairs with duplicate keys, so :class:`KafkaHeadersGetter`
and :class:`KafkaHeadersSetter` adapt them.
"""

from __future__ import annotations

from collections.abc import MutableSequence, Sequence

from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "TRACEPARENT_HEADER",
    "KafkaHeaders",
    "KafkaHeadersGetter",
    "KafkaHeadersSetter",
    "extract_headers",
]

KafkaHeaders = Sequence[tuple[str, bytes | None]]
"""Kafka record headers as confluent-kafka returns them: ordered, duplicates allowed."""

TRACEPARENT_HEADER = "traceparent"
"""The W3C header name (Kafka header keys are matched exactly, lowercase)."""

_W3C = TraceContextTextMapPropagator()


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
