"""OTLP export from configuration: an ``[observability.otlp]`` section as exporters.

A flow built from a configuration (``flows.pipeline``, ``flows.orders``) calls
:func:`arm` with its section. Arming checks what can be checked without a thread or a
socket — the ``otlp`` extra is installed, the protocol is one we speak, each header's
secret reference resolves — and leaves the section with the gate (:mod:`._switch`). Observability
then turns on when the first source or sink partition is built (or when
:func:`~thalweg_bytewax.observability.observe` runs), and only then are the exporters
made: a ``BatchSpanProcessor`` with an ``OTLPSpanExporter`` on a tracer provider of
its own, and a ``PeriodicExportingMetricReader`` with an ``OTLPMetricExporter`` on the
process's meter provider. Both flush at interpreter exit (the SDK's own exit hooks).

Precedence is the OpenTelemetry SDK's: a setting of the section wins over the
standard variable (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``…_HEADERS`` key by key,
``…_TIMEOUT``, ``…_PROTOCOL``, ``OTEL_METRIC_EXPORT_INTERVAL``, ``OTEL_TRACES_SAMPLER``,
``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``), which wins over the SDK default.
Header values are resolved only when the exporters are made and are never logged.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from thalweg_bytewax._redact import redact_url
from thalweg_bytewax.errors import ConfigError

from ._switch import arm as arm_export
from .settings import OtlpExport, OtlpSection

if TYPE_CHECKING:
    from datetime import timedelta

    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

__all__ = [
    "ENDPOINT_ENVS",
    "OTLP_EXTRA",
    "OtlpExport",
    "arm",
    "check",
    "exporters",
    "is_enabled",
]

logger = logging.getLogger(__name__)

OTLP_EXTRA = "otlp"
"""The thalweg-bytewax extra that installs the OTLP/HTTP exporter."""
ENDPOINT_ENVS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)
"""The standard variables whose presence turns OTLP export on when ``enabled`` is unset."""
_EXPORTER_MODULE = "opentelemetry.exporter.otlp.proto.http"
_PROTOCOL = "http/protobuf"
_WHERE = "observability.otlp"


def is_enabled(section: OtlpSection, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``section`` (with the environment) asks for OTLP export.

    Args:
        section: The ``[observability.otlp]`` section.
        env: The environment (default: ``os.environ``).
    """
    if section.enabled is not None:
        return section.enabled
    env = os.environ if env is None else env
    return bool(section.endpoint) or any(env.get(name) for name in ENDPOINT_ENVS)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing
        return False


def check(section: OtlpSection, env: Mapping[str, str] | None = None) -> None:
    """Refuse, before anything runs, a section that cannot export.

    Raises:
        ConfigError: When the ``otlp`` extra is missing, the protocol (here or in
            ``OTEL_EXPORTER_OTLP_PROTOCOL``) is not ``http/protobuf``, or a header's
            secret reference does not resolve now (named, never its value).
    """
    env = os.environ if env is None else env
    if not _installed("opentelemetry.sdk") or not _installed(_EXPORTER_MODULE):
        msg = (
            f"`{_WHERE}`: OTLP export is configured but the OTLP exporter is not "
            f'installed; install it with: pip install "thalweg-bytewax[{OTLP_EXTRA}]" '
            "(or turn it off with `enabled = false`)"
        )
        raise ConfigError(msg)
    protocol = section.protocol or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or _PROTOCOL
    if protocol != _PROTOCOL:
        where = "protocol" if section.protocol else "`OTEL_EXPORTER_OTLP_PROTOCOL`"
        msg = (
            f"`{_WHERE}`: {where} expected {_PROTOCOL!r}; got {protocol!r}; thalweg "
            f"exports OTLP over HTTP with protobuf bodies only: set `protocol = "
            f'"{_PROTOCOL}"`'
        )
        raise ConfigError(msg)
    for name, value in section.headers.items():
        for ref in value.references:
            problem = ref.problem(env)
            if problem is not None:
                msg = (
                    f"`{_WHERE}.headers.{name}`: the secret reference `{ref}` does not "
                    f"resolve ({problem}); set it in the flow's environment"
                )
                raise ConfigError(msg)


def arm(section: OtlpSection, *, flow_id: str) -> bool:
    """Export over OTLP once observability turns on in this process, if ``section`` asks.

    Checks the section (:func:`check`) and leaves it with the gate: the exporters are
    made when the first partition is built. Nothing starts here.

    Args:
        section: The ``[observability.otlp]`` section.
        flow_id: The flow's id (the default ``service.name`` is ``thalweg-<flow_id>``).

    Returns:
        Whether OTLP export was armed.

    Raises:
        ConfigError: See :func:`check`.
    """
    if not is_enabled(section):
        return False
    check(section)
    arm_export(OtlpExport(section, f"thalweg-{flow_id}"))
    return True


def _seconds(value: timedelta | None) -> float | None:
    """A duration as the exporters take it, in seconds (``None``: the SDK's default)."""
    return None if value is None else value.total_seconds()


def _endpoint(base: str | None, signal: str) -> str | None:
    return None if base is None else f"{base.removesuffix('/')}/v1/{signal}"


def _resource(export: OtlpExport) -> Resource:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource  # noqa: PLC0415

    s = export.section
    attrs: dict[str, str] = dict(s.resource_attributes)
    if s.service_name:
        attrs[SERVICE_NAME] = s.service_name
    resource = Resource.create(attrs)  # the environment's attributes, then ours
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: export.default_service}))
    return resource


def exporters(
    export: OtlpExport, *, tracing: bool = True
) -> tuple[TracerProvider | None, tuple[MetricReader, ...], Resource]:
    """Make the tracer provider and the metric reader an armed section asks for.

    Header secrets are resolved here, at the last moment.

    Args:
        export: The armed section.
        tracing: Make the tracer provider (false when code gave its own).

    Returns:
        The tracer provider (or None), the metric readers to add, and the resource
        (``service.name`` and the other attributes) for the meter provider.

    Raises:
        ConfigError: When the exporter is not installed or a secret does not resolve.
    """
    check(export.section)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # noqa: PLC0415
        OTLPMetricExporter,
    )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
        OTLPSpanExporter,
    )
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
    from opentelemetry.sdk.trace.sampling import (  # noqa: PLC0415
        ParentBased,
        TraceIdRatioBased,
    )

    s = export.section
    headers = {name: value.resolve() for name, value in s.headers.items()} or None
    resource = _resource(export)
    provider: TracerProvider | None = None
    if s.traces and tracing:
        sampler = (
            ParentBased(TraceIdRatioBased(s.trace_sample_ratio))
            if s.trace_sample_ratio is not None
            else None  # the SDK's: OTEL_TRACES_SAMPLER, else ParentBased(ALWAYS_ON)
        )
        provider = TracerProvider(sampler=sampler, resource=resource)
        span_exporter = OTLPSpanExporter(
            endpoint=_endpoint(s.endpoint, "traces"), headers=headers, timeout=_seconds(s.timeout)
        )
        provider.add_span_processor(BatchSpanProcessor(span_exporter))
    readers: tuple[MetricReader, ...] = ()
    if s.metrics:
        metric_exporter = OTLPMetricExporter(
            endpoint=_endpoint(s.endpoint, "metrics"), headers=headers, timeout=_seconds(s.timeout)
        )
        every = s.metric_export_interval
        interval = None if every is None else every.total_seconds() * 1000
        readers = (PeriodicExportingMetricReader(metric_exporter, interval),)
    signals = [n for n, on in (("traces", provider is not None), ("metrics", bool(readers))) if on]
    where = s.endpoint or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "the SDK default"
    logger.info(
        "OTLP export of %s to %s as service %r (%d header(s), values not shown)",
        " and ".join(signals) or "nothing",
        redact_url(where),
        resource.attributes.get("service.name"),
        len(headers or ()),
    )
    return provider, readers, resource
