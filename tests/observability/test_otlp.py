"""OTLP export by configuration: a flow run exports spans and metrics to a real receiver.

The receiver is a local HTTP server that accepts ``POST /v1/traces`` and ``/v1/metrics``
and decodes the protobuf bodies with ``opentelemetry.proto``; the flow runs as a user
runs it, ``python -m bytewax.run flows.pipeline`` with ``THALWEG_CONFIG``, in its own
process, reading a Kafka topic whose records carry an upstream ``traceparent``.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider

from tests.observability.conftest import produce_traced_orders
from thalweg_bytewax.config import SecretRef
from thalweg_bytewax.dev.samples import ORDER_AVRO_SCHEMA
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.observability import instruments, otlp
from thalweg_bytewax.observability.settings import OtlpSection
from thalweg_bytewax.pipeline import PipelineConfig

REPO = Path(__file__).resolve().parents[2]
TOKEN = "otlp-token-3f9c1b7e5d"  # noqa: S105 - a test value, grepped for in every output


@dataclass
class Received:
    """What the receiver was sent: per path, the request headers and decoded bodies."""

    headers: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    traces: list[ExportTraceServiceRequest] = field(default_factory=list)
    metrics: list[ExportMetricsServiceRequest] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[tuple[str, Received]]:
    """A local OTLP/HTTP receiver on a free port: its base URL and what it received."""
    got = Received()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            with lock:
                got.headers.setdefault(self.path, []).append(dict(self.headers.items()))
                if self.path == "/v1/traces":
                    got.traces.append(ExportTraceServiceRequest.FromString(body))
                elif self.path == "/v1/metrics":
                    got.metrics.append(ExportMetricsServiceRequest.FromString(body))
            code = 200 if self.path in ("/v1/traces", "/v1/metrics") else 404
            self.send_response(code)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A short poll interval: `shutdown` waits up to one (0.5 s by default).
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THALWEG_", "OTEL_"))}
    return {**env, "PYTHONPATH": str(REPO), **extra}


def _pipeline_toml(tmp_path: Path, bootstrap: str, topic: str, endpoint: str) -> Path:
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "1.avsc").write_text(json.dumps(ORDER_AVRO_SCHEMA))
    config = tmp_path / "pipeline.toml"
    config.write_text(
        f"""
name = "otlp_orders"
data_dir = "{tmp_path / "data"}"

[source]
kind = "kafka"
brokers = "{bootstrap}"
topics = ["{topic}"]
tail = false

[codec]
kind = "avro"
schema_dir = "schemas"
reader_schema = "schemas/1.avsc"

[observability.otlp]
endpoint = "{endpoint}"
headers = {{ authorization = "Bearer ${{env:OTLP_TEST_TOKEN}}" }}
metric_export_interval = 0.5
service_name = "orders-ingest"
resource_attributes = {{ "deployment.environment" = "test" }}
"""
    )
    return config


@pytest.mark.slow
def test_a_flow_run_exports_spans_and_metrics_to_the_configured_receiver(
    kafka_bootstrap, make_topic, tmp_path: Path, receiver
) -> None:
    endpoint, got = receiver
    topic = make_topic()
    upstream = TracerProvider().get_tracer("checkout-service")
    origin = produce_traced_orders(kafka_bootstrap, topic, 40, upstream)
    config = _pipeline_toml(tmp_path, kafka_bootstrap, topic, endpoint)

    done = subprocess.run(
        [sys.executable, "-m", "bytewax.run", "flows.pipeline"],
        env=_env(THALWEG_CONFIG=str(config), OTLP_TEST_TOKEN=TOKEN),
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]

    # Every request carried the header, its secret resolved from the environment.
    assert set(got.headers) == {"/v1/traces", "/v1/metrics"}
    for requests in got.headers.values():
        assert all(h.get("authorization") == f"Bearer {TOKEN}" for h in requests)

    spans = [
        (resource_spans.resource, span)
        for request in got.traces
        for resource_spans in request.resource_spans
        for scope in resource_spans.scope_spans
        for span in scope.spans
    ]
    by_name = {span.name: span for _, span in spans}
    receive = by_name[f"receive {topic}"]
    decode = by_name["decode otlp_orders.decode"]
    write = by_name["write otlp_orders.raw_lane"]
    # The upstream trace continues: the receive span's parent is the producer's span.
    assert int.from_bytes(receive.trace_id, "big") == origin.trace_id
    assert int.from_bytes(receive.parent_span_id, "big") == origin.span_id
    assert decode.trace_id == receive.trace_id and decode.parent_span_id == receive.span_id
    assert write.trace_id == receive.trace_id
    resource = {a.key: a.value.string_value for a in spans[0][0].attributes}
    assert resource["service.name"] == "orders-ingest"
    assert resource["deployment.environment"] == "test"

    points: dict[str, list[tuple[dict[str, str], float]]] = {}
    for request in got.metrics:
        for resource_metrics in request.resource_metrics:
            for scope in resource_metrics.scope_metrics:
                for metric in scope.metrics:
                    kind = metric.WhichOneof("data")
                    for p in getattr(metric, kind).data_points:
                        attrs = {a.key: str(_value(a.value)) for a in p.attributes}
                        value = p.count if kind == "histogram" else _number(p)
                        points.setdefault(metric.name, []).append((attrs, value))
    records = points[instruments.SOURCE_RECORDS.name]
    assert (
        {"step_id": "otlp_orders.otlp_orders_in", "topic": topic, "partition": "0"},
        40,
    ) in records
    rows = {a["step_id"]: v for a, v in points[instruments.SINK_ROWS_WRITTEN.name]}
    assert rows["otlp_orders.raw_lane"] == 40
    step_in = [
        v
        for a, v in points[instruments.STEP_RECORDS_IN.name]
        if a["step_id"] == "otlp_orders.decode"
    ]
    assert max(step_in) == 40
    assert any(v > 0 for _, v in points[instruments.BATCH_DURATION.name])

    # The secret is sent, and shown nowhere: not in the flow's output or log.
    assert TOKEN not in done.stdout and TOKEN not in done.stderr


def _value(v) -> object:
    return getattr(v, v.WhichOneof("value"))


def _number(p) -> float:
    return float(p.as_int if p.WhichOneof("value") == "as_int" else p.as_double)


@pytest.mark.slow
def test_the_header_secret_never_appears_in_config_show_or_a_repr(tmp_path: Path) -> None:
    config = _pipeline_toml(tmp_path, "127.0.0.1:1", "orders", "http://127.0.0.1:1")
    env = _env(OTLP_TEST_TOKEN=TOKEN)
    show = subprocess.run(
        [sys.executable, "-m", "thalweg_bytewax.cli", "config", "show", str(config)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert show.returncode == 0, show.stderr
    assert "${env:OTLP_TEST_TOKEN}" in show.stdout
    assert TOKEN not in show.stdout + show.stderr
    secrets = subprocess.run(
        [sys.executable, "-m", "thalweg_bytewax.cli", "config", "secrets", str(config)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert secrets.returncode == 0, secrets.stderr
    assert "observability.otlp.headers.authorization" in secrets.stdout
    assert "${env:OTLP_TEST_TOKEN}  ok" in secrets.stdout
    assert TOKEN not in secrets.stdout + secrets.stderr

    loaded = PipelineConfig.load(config, env={"OTLP_TEST_TOKEN": TOKEN})
    assert TOKEN not in repr(loaded) and TOKEN not in str(loaded.observability)
    assert (
        loaded.observability.otlp.headers["authorization"].resolve({"OTLP_TEST_TOKEN": TOKEN})
        == f"Bearer {TOKEN}"
    )


def test_otlp_turns_on_by_endpoint_here_or_in_the_standard_variable() -> None:
    assert not otlp.is_enabled(OtlpSection(), {})
    assert otlp.is_enabled(OtlpSection(endpoint="http://collector:4318"), {})
    assert otlp.is_enabled(OtlpSection(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})
    assert not otlp.is_enabled(
        OtlpSection(enabled=False), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    )


def test_a_header_secret_that_does_not_resolve_fails_at_start_naming_the_key() -> None:
    section = OtlpSection(endpoint="http://c:4318", headers={"x-key": SecretRef("${env:NOPE_X}")})
    with pytest.raises(ConfigError, match=r"observability.otlp.headers.x-key.*\$\{env:NOPE_X\}"):
        otlp.check(section, {})


def test_another_protocol_in_the_standard_variable_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"OTEL_EXPORTER_OTLP_PROTOCOL.*'grpc'"):
        otlp.check(OtlpSection(), {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})


@pytest.mark.slow
def test_without_the_exporter_installed_the_flow_fails_at_build_naming_the_extra(
    tmp_path: Path,
) -> None:
    # A process where the OTLP exporter cannot be imported (as without the extra).
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('opentelemetry.exporter.otlp'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Block())\n"
        "import flows.pipeline\n"
    )
    config = _pipeline_toml(tmp_path, "127.0.0.1:1", "orders", "http://127.0.0.1:1")
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(THALWEG_CONFIG=str(config), OTLP_TEST_TOKEN=TOKEN),
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "ConfigError" in done.stderr
    assert 'pip install "thalweg-bytewax[otlp]"' in done.stderr


def test_the_orders_flow_takes_the_section_from_its_environment() -> None:
    from flows.orders import OrdersSettings

    env = {
        "THALWEG_OBSERVABILITY__OTLP__ENDPOINT": "http://collector:4318",
        "THALWEG_OBSERVABILITY__OTLP__HEADERS__AUTHORIZATION": "Bearer ${env:OTLP_TEST_TOKEN}",
        "THALWEG_OBSERVABILITY__OTLP__TRACE_SAMPLE_RATIO": "0.25",
    }
    section = OrdersSettings.load(env).pipeline().observability.otlp
    assert section.endpoint == "http://collector:4318"
    assert section.trace_sample_ratio == 0.25
    assert str(section.headers["authorization"]) == "Bearer ${env:OTLP_TEST_TOKEN}"
    assert otlp.is_enabled(section, {})


@pytest.mark.parametrize(
    ("ratio", "root"),
    [(None, "AlwaysOnSampler"), (0.1, "TraceIdRatioBased{0.1}")],
)
def test_sampling_is_parent_based_every_trace_unless_a_ratio_is_set(
    monkeypatch: pytest.MonkeyPatch, ratio: float | None, root: str
) -> None:
    for name in ("OTEL_TRACES_SAMPLER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(name, raising=False)
    section = OtlpSection(endpoint="http://127.0.0.1:1", metrics=False, trace_sample_ratio=ratio)
    provider, readers, resource = otlp.exporters(otlp.OtlpExport(section, "thalweg-flow"))
    assert provider is not None and readers == ()
    try:
        # The root sampler as asked; a parent's decision is kept either way.
        description = provider.sampler.get_description()
        assert description.startswith(f"ParentBased{{root:{root},remoteParentSampled:")
        assert resource.attributes["service.name"] == "thalweg-flow"
    finally:
        provider.shutdown()
