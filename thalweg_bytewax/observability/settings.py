"""The ``[observability]`` configuration section: OTLP export of traces and metrics.

Plain configuration models (pydantic, no OpenTelemetry import), so a pipeline file
or the orders flow's settings can carry them without the ``observability`` extra;
:mod:`.otlp` turns them into exporters when a flow starts. Precedence, per setting,
is the OpenTelemetry SDK's: what the configuration says (file < ``THALWEG_*`` <
``--set``) wins over the standard ``OTEL_*`` variables, which win over the SDK's
defaults. See ``docs/operations.md``, "OTLP export".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from thalweg_bytewax.config import ConfigModel, PositiveDuration, SecretRef, renamed_keys

__all__ = ["ObservabilitySection", "OtlpExport", "OtlpSection"]


# The durations' names when they were seconds.
_OLD_NAMES = {"timeout_s": "timeout", "metric_export_interval_s": "metric_export_interval"}


class OtlpSection(ConfigModel):
    """OTLP export of the flow's traces and metrics (the ``otlp`` extra).

    On when ``enabled`` is true, or when it is unset and an endpoint is set here or in
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or its ``_TRACES_`` / ``_METRICS_`` variants).
    """

    enabled: bool | None = None
    """Export over OTLP; unset = when an endpoint is set, here or in
    `OTEL_EXPORTER_OTLP_ENDPOINT`."""
    endpoint: str | None = None
    """The collector's base URL (`/v1/traces`, `/v1/metrics` appended); unset =
    `OTEL_EXPORTER_OTLP_ENDPOINT`, else `http://localhost:4318`."""
    protocol: Literal["http/protobuf"] | None = None
    """The OTLP transport (`http/protobuf`, the one supported); unset =
    `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`."""
    # Headers usually carry an API key: `${env:…}` / `${file:…}` references, never printed.
    headers: dict[str, SecretRef] = Field(default_factory=dict)
    """Request headers (e.g. `authorization`), over those of `OTEL_EXPORTER_OTLP_HEADERS`."""
    timeout: PositiveDuration | None = None
    """One export request's timeout (seconds or ISO-8601; `timeout_s` is its old name);
    unset = `OTEL_EXPORTER_OTLP_TIMEOUT`, else 10 seconds."""
    traces: bool = True
    """Export the batch spans."""
    metrics: bool = True
    """Export the metrics (next to the Prometheus `/metrics`)."""
    metric_export_interval: PositiveDuration | None = None
    """How often metrics are pushed (seconds or ISO-8601; `metric_export_interval_s` is its
    old name); unset = `OTEL_METRIC_EXPORT_INTERVAL` (ms), else 60 seconds."""
    trace_sample_ratio: float | None = Field(default=None, ge=0, le=1)
    """Sample root traces at this ratio, `ParentBased(TraceIdRatioBased(r))`; unset =
    `OTEL_TRACES_SAMPLER`, else every trace (`ParentBased(ALWAYS_ON)`)."""
    service_name: str | None = None
    """The resource's `service.name`; unset = `OTEL_SERVICE_NAME`, else `thalweg-<flow id>`."""
    resource_attributes: dict[str, str] = Field(default_factory=dict)
    """Further resource attributes, over those of `OTEL_RESOURCE_ATTRIBUTES`."""

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return renamed_keys(data, _OLD_NAMES, where="[observability.otlp]")


class ObservabilitySection(ConfigModel):
    """How the flow's traces and metrics leave the process."""

    otlp: OtlpSection = Field(default_factory=OtlpSection)
    """OTLP export (`[observability.otlp]`)."""


@dataclass(frozen=True)
class OtlpExport:
    """An OTLP section armed for a flow: what :func:`exporters` builds from.

    Attributes:
        section: The ``[observability.otlp]`` section.
        default_service: The ``service.name`` when neither the section nor the
            environment names one.
    """

    section: OtlpSection
    default_service: str
