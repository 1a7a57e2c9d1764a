"""The sampler is asked before a batch span is made; what it drops costs no span and no stamp.

Real OpenTelemetry SDK providers (with their own samplers) and the real hooks the
operators call; spans are collected by an in-memory exporter.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    DEFAULT_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from tests.helpers import raw_values
from thalweg_bytewax.observability import inject_headers, observe, reset
from thalweg_bytewax.observability.gate import observe_step
from thalweg_bytewax.observability.tracing import (
    TRACEPARENT_KEY,
    batch_context,
    receive_span,
    stamp,
)

HEADERS = "_twg_source_headers"


def traced(sampler: Sampler) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observe(tracing_provider=provider, metrics=False)
    return exporter


def upstream(trace_id: int, span_id: int, *, sampled: bool) -> bytes:
    return f"00-{trace_id:032x}-{span_id:016x}-{'01' if sampled else '00'}".encode()


def carrying(parent: bytes, rows: int = 3) -> pa.RecordBatch:
    """A batch stamped with ``parent`` (as the source leaves it)."""
    batch = pa.record_batch({"x": list(range(rows))})
    return batch.replace_schema_metadata({TRACEPARENT_KEY: parent})


def decode_like(batch: pa.RecordBatch) -> pa.RecordBatch | None:
    """One batch through an observed step that builds a new batch (as decode does)."""
    obs = observe_step("decode", "s.decode", batch)
    assert obs is not None
    return obs.finish(pa.record_batch({"y": [1] * batch.num_rows}), None)


def test_an_untraced_batch_is_not_stamped_when_roots_are_never_sampled() -> None:
    for sampler in (ParentBased(ALWAYS_OFF), ParentBased(TraceIdRatioBased(0.0))):
        exporter = traced(sampler)
        batch = raw_values([b"a", b"b"], headers=[None, [("other", b"1")]])
        out = receive_span(batch, batch.column(HEADERS), step_id="in", topic="t", partition=0)
        # No span, and no schema metadata rewrite: the very same batch goes on.
        assert out is batch
        assert exporter.get_finished_spans() == ()
        reset()


def test_a_ratio_sampler_leaves_its_dropped_roots_unstamped() -> None:
    exporter = traced(ParentBased(TraceIdRatioBased(0.25)))
    batch = raw_values([b"a"], headers=[None])
    outs = [
        receive_span(batch, batch.column(HEADERS), step_id="in", topic="t", partition=0)
        for _ in range(200)
    ]
    stamped = [o for o in outs if o is not batch]
    spans = exporter.get_finished_spans()
    # Every stamped batch has its recorded span; every dropped one is the input itself.
    assert len(stamped) == len(spans)
    assert 0 < len(spans) < 200
    assert {batch_context(o) is not None for o in stamped} == {True}


def test_an_unsampled_upstream_context_travels_on_without_spans() -> None:
    exporter = traced(DEFAULT_ON)
    parent = upstream(0xABC, 0xDEF, sampled=False)
    batch = raw_values([b"a", b"b"], headers=[[("traceparent", parent)]] * 2)
    received = receive_span(batch, batch.column(HEADERS), step_id="in", topic="t", partition=0)
    assert received.schema.metadata[TRACEPARENT_KEY] == parent
    decoded = decode_like(received)
    assert decoded is not None
    # The step made no span: the upstream context (not sampled) is carried as it was.
    assert decoded.schema.metadata[TRACEPARENT_KEY] == parent
    # A producer further down keeps the upstream decision (and span).
    assert inject_headers(decoded, topic="out") == [("traceparent", parent)]
    assert exporter.get_finished_spans() == ()


@given(
    trace_id=st.integers(min_value=1, max_value=2**128 - 1),
    span_id=st.integers(min_value=1, max_value=2**64 - 1),
    sampled=st.booleans(),
    rows=st.integers(min_value=0, max_value=5),
)
def test_a_step_continues_sampled_traces_and_carries_unsampled_ones(
    trace_id: int, span_id: int, sampled: bool, rows: int
) -> None:
    reset()
    exporter = traced(DEFAULT_ON)
    parent = upstream(trace_id, span_id, sampled=sampled)
    out = decode_like(carrying(parent, rows))
    assert out is not None
    ctx = batch_context(out)
    assert ctx is not None
    got = trace.get_current_span(ctx).get_span_context()
    assert got.trace_id == trace_id
    spans = exporter.get_finished_spans()
    if sampled:
        (span,) = spans
        assert span.parent is not None and span.parent.span_id == span_id
        assert got.span_id == span.context.span_id  # the next step is its child
    else:
        assert spans == ()
        assert out.schema.metadata[TRACEPARENT_KEY] == parent


def test_a_stamped_context_is_read_back_exactly() -> None:
    traced(DEFAULT_ON)
    sc = SpanContext(0x1234, 0x5678, False, TraceFlags(1))
    stamped = stamp(pa.record_batch({"x": [1]}), NonRecordingSpan(sc))
    assert stamped.schema.metadata[TRACEPARENT_KEY] == upstream(0x1234, 0x5678, sampled=True)
    got = trace.get_current_span(batch_context(stamped)).get_span_context()
    assert (got.trace_id, got.span_id, got.trace_flags, got.is_remote) == (
        0x1234,
        0x5678,
        TraceFlags(1),
        True,
    )


_HEX = "0123456789abcdef"


@st.composite
def traceparents(draw: st.DrawFn) -> bytes:
    """Valid and near-valid W3C traceparent values (and some noise)."""

    def field(n: int) -> str:
        kind = draw(st.sampled_from(["hex", "zero", "upper", "short", "junk"]))
        if kind == "zero":
            return "0" * n
        if kind == "upper":
            return draw(st.text("0123456789ABCDEF", min_size=n, max_size=n))
        if kind == "short":
            return draw(st.text(_HEX, min_size=0, max_size=n - 1))
        if kind == "junk":
            return draw(st.text(min_size=n, max_size=n))
        return draw(st.text(_HEX, min_size=n, max_size=n))

    version = draw(st.sampled_from(["00", "01", "ff", "cc", None]))
    parts = [
        version if version is not None else field(2),
        draw(st.one_of(st.text(_HEX, min_size=32, max_size=32), st.builds(field, st.just(32)))),
        draw(st.one_of(st.text(_HEX, min_size=16, max_size=16), st.builds(field, st.just(16)))),
        draw(st.sampled_from(["01", "00", "ff", "0x"])),
    ]
    value = "-".join(parts)
    value = draw(st.sampled_from(["", " ", "\t "])) + value
    value += draw(st.sampled_from(["", " ", "-x", "-" + "a" * 600, "\n", "-é", "é"]))
    return value.encode()


@given(value=traceparents())
def test_parse_traceparent_agrees_with_the_propagator(value: bytes) -> None:
    from thalweg_bytewax.observability import extract_headers
    from thalweg_bytewax.observability.headers import parse_traceparent

    want = trace.get_current_span(extract_headers([("traceparent", value)])).get_span_context()
    got = parse_traceparent(value)
    if not want.is_valid:
        assert got is None
    else:
        assert got is not None
        assert (got.trace_id, got.span_id, got.trace_flags, got.is_remote) == (
            want.trace_id,
            want.span_id,
            want.trace_flags,
            want.is_remote,
        )
