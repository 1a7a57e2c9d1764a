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

from thalweg_bytewax._lazy import lazy_package

if TYPE_CHECKING:
    from .headers import KafkaHeadersGetter, KafkaHeadersSetter, extract_headers
    from .health import Component, HealthRegistry, Status, registry
    from .hooks import observe, reset, running_server
    from .metrics import Metrics, enable_metrics, metrics
    from .server import ObservabilityServer, serve
    from .tracing import inject_headers

__all__ = [
    "Component",
    "HealthRegistry",
    "KafkaHeadersGetter",
    "KafkaHeadersSetter",
    "Metrics",
    "ObservabilityServer",
    "Status",
    "enable_metrics",
    "extract_headers",
    "inject_headers",
    "metrics",
    "observe",
    "registry",
    "reset",
    "serve",
    "running_server",
]

_HOMES = {
    "Component": "health",
    "HealthRegistry": "health",
    "Status": "health",
    "registry": "health",
    "observe": "hooks",
    "reset": "hooks",
    "running_server": "hooks",
    "Metrics": "metrics",
    "enable_metrics": "metrics",
    "metrics": "metrics",
    "ObservabilityServer": "server",
    "serve": "server",
    "KafkaHeadersGetter": "headers",
    "KafkaHeadersSetter": "headers",
    "extract_headers": "headers",
    "inject_headers": "tracing",
}


def _require_sdk(module: str) -> None:
    if module != ".health":
        from thalweg_bytewax import _deps  # noqa: PLC0415 - only when a name is asked for

        _deps.require("opentelemetry.sdk", extra="observability")


# Every name but health's needs the SDK, required before its module is imported.
__getattr__, __dir__ = lazy_package(
    __name__, {n: f".{home}" for n, home in _HOMES.items()}, globals(), before=_require_sdk
)
