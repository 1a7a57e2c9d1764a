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

The observers live in :mod:`.observers`; this module answers their names too.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
from typing import TypeVar

from opentelemetry import trace
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.trace import TracerProvider

from thalweg_bytewax.errors import ConfigError

from . import _switch, tracing
from ._switch import HTTP_HOST_ENV, HTTP_PORT_ENV
from .health import registry
from .meters import enable_metrics
from .observers import (
    REJECT_DEGRADED_FRACTION,
    SinkObserver,
    SourceObserver,
    StepBatch,
    forget_steps,
)
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

T = TypeVar("T")
"""Whatever :func:`observe` is given back (a Dataflow, typically)."""

_lock = threading.Lock()
_server: ObservabilityServer | None = None
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
        export = _switch.take_armed()
        if export is not None:
            from .meters import metrics as current_metrics  # noqa: PLC0415 - `metrics` is an arg
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
        _switch.set_on(True)
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
        _switch.set_on(False)
        tracing.disable_tracing()
        if _server is not None:
            _server.close()
            _server = None
        registry.clear()
        forget_steps()
