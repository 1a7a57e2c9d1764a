"""Observability tests: each starts from the hooks off and leaves them off."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.trace import SpanContext, SpanKind, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from thalweg_bytewax.dev.samples import encode_order_avro, sample_orders
from thalweg_bytewax.observability import reset
from thalweg_bytewax.observability.headers import KafkaHeadersSetter
from thalweg_bytewax.observability.server import _Server
from thalweg_bytewax.testing import produce


@pytest.fixture(autouse=True)
def observability_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Stopping the server waits for its serving loop to look at the shutdown flag, once
    # a poll interval (0.5 s by default, per server): a test's server looks every 10 ms.
    serve_forever = _Server.serve_forever

    def poll_often(self: _Server, poll_interval: float = 0.01) -> None:
        serve_forever(self, min(poll_interval, 0.01))

    monkeypatch.setattr(_Server, "serve_forever", poll_often)
    reset()
    yield
    reset()


def get(url: str) -> tuple[int, bytes]:
    """A real HTTP GET: the status code and the body (also for 4xx / 5xx)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - loopback
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def get_json(url: str) -> tuple[int, Any]:
    code, body = get(url)
    return code, json.loads(body)


def produce_traced_orders(
    bootstrap: str, topic: str, count: int, upstream: Tracer
) -> SpanContext:
    """Produce ``count`` sample orders to partition 0, each carrying the W3C
    ``traceparent`` of one upstream "place order" span; return that span's context."""
    with upstream.start_as_current_span("place order", kind=SpanKind.PRODUCER) as origin:
        headers: list[tuple[str, bytes]] = []
        TraceContextTextMapPropagator().inject(headers, setter=KafkaHeadersSetter())
    orders = list(sample_orders(count))
    produce(
        bootstrap,
        topic,
        [{"value": encode_order_avro(o), "partition": 0, "headers": headers} for o in orders],
    )
    return origin.get_span_context()
