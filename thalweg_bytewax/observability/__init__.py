"""Metrics, traces and health of a thalweg flow (the ``observability`` extra).

Opt-in: ``observe(flow)`` (or ``THALWEG_HTTP_PORT``) turns on the hooks the Kafka
source, the epoch sinks and the decode / validate operators carry, and starts the HTTP
server when a port is configured::

    from thalweg_bytewax.observability import observe

    flow = observe(build_flow(settings), port=9464)   # /health /ready /live /stats /metrics

Metric names are in :mod:`.instruments`, the health tree in :mod:`.health`, trace
context through Kafka headers (:mod:`.headers`) and Arrow batches in :mod:`.tracing`, the switch the
connectors check in :mod:`.gate`. See ``docs/operations.md``.

The names below are imported on first use, so that importing :mod:`.gate` (which every
Kafka source partition and sink partition does) never imports OpenTelemetry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_reexports

if TYPE_CHECKING:
    from .headers import KafkaHeadersGetter as KafkaHeadersGetter
    from .headers import KafkaHeadersSetter as KafkaHeadersSetter
    from .headers import extract_headers as extract_headers
    from .health import Component as Component
    from .health import HealthRegistry as HealthRegistry
    from .health import Status as Status
    from .health import registry as registry
    from .hooks import observe as observe
    from .hooks import reset as reset
    from .hooks import running_server as running_server
    from .meters import Metrics as Metrics
    from .meters import enable_metrics as enable_metrics
    from .meters import metrics as metrics
    from .server import ObservabilityServer as ObservabilityServer
    from .server import serve as serve
    from .tracing import inject_headers as inject_headers


def _require_sdk(module: str) -> None:
    if module != ".health":
        from thalweg_bytewax import _deps  # noqa: PLC0415 - only when a name is asked for

        _deps.require("opentelemetry.sdk", extra="observability")


# Every name but health's needs the SDK, required before its module is imported.
__getattr__, __dir__ = lazy_reexports(globals(), before=_require_sdk)
