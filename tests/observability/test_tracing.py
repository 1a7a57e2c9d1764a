"""W3C trace context: Kafka headers in, Arrow batches through the steps, headers out."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from bytewax.testing import run_main
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import thalweg_bytewax.operators as twg
from tests.helpers import raw_values
from tests.observability.conftest import produce_traced_orders
from thalweg_bytewax.codecs import AvroCodec
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.contracts import Rule
from thalweg_bytewax.dev.samples import ORDER_AVRO_SCHEMA
from thalweg_bytewax.observability import (
    KafkaHeadersGetter,
    KafkaHeadersSetter,
    extract_headers,
    inject_headers,
    observe,
)
from thalweg_bytewax.observability.tracing import (
    TRACEPARENT_KEY,
    batch_context,
    receive_span,
    without_trace,
)

W3C = TraceContextTextMapPropagator()


def traced_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def trace_id_of(headers) -> int:
    from opentelemetry import trace

    return trace.get_current_span(extract_headers(headers)).get_span_context().trace_id


def test_getter_reads_kafka_headers_with_duplicates_and_nulls() -> None:
    getter = KafkaHeadersGetter()
    headers = [("a", None), ("traceparent", b"x"), ("b", b"1"), ("traceparent", b"y")]
    assert getter.get(headers, "traceparent") == ["y"]
    assert getter.get(headers, "a") is None
    assert getter.get(headers, "missing") is None
    assert getter.keys(headers) == ["a", "traceparent", "b", "traceparent"]


@given(
    trace_id=st.integers(min_value=1, max_value=2**128 - 1),
    span_id=st.integers(min_value=1, max_value=2**64 - 1),
    others=st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=5)), max_size=4),
)
def test_inject_then_extract_round_trips_through_kafka_headers(trace_id, span_id, others) -> None:
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    ctx = trace.set_span_in_context(
        NonRecordingSpan(SpanContext(trace_id, span_id, False, TraceFlags(1)))
    )
    headers = [(k, v) for k, v in others if k != "traceparent"]
    W3C.inject(headers, context=ctx, setter=KafkaHeadersSetter())
    W3C.inject(headers, context=ctx, setter=KafkaHeadersSetter())  # replaces, never repeats
    assert [k for k, _ in headers].count("traceparent") == 1
    got = trace.get_current_span(extract_headers(headers)).get_span_context()
    assert (got.trace_id, got.span_id, got.is_remote) == (trace_id, span_id, True)


def test_source_span_parents_on_the_first_traced_record_and_links_the_others() -> None:
    provider, exporter = traced_provider()
    observe(tracing_provider=provider, metrics=False)
    up = provider.get_tracer("upstream")
    carriers = []
    for _ in range(3):
        with up.start_as_current_span("produce"):
            h: list[tuple[str, bytes]] = []
            W3C.inject(h, setter=KafkaHeadersSetter())
            carriers.append(h)
    headers = [None, [("other", b"1")], carriers[0], carriers[1], carriers[1], carriers[2]]
    batch = raw_values([b"v"] * 6, headers=headers)
    stamped = receive_span(
        batch, batch.column("_twg_source_headers"), step_id="in", topic="orders", partition=0
    )
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "receive orders"]
    assert span.kind is SpanKind.CONSUMER
    assert span.context.trace_id == trace_id_of(carriers[0])
    assert [link.context.trace_id for link in span.links] == [
        trace_id_of(carriers[1]),
        trace_id_of(carriers[2]),
    ]
    assert TRACEPARENT_KEY in stamped.schema.metadata
    assert stamped.column(0) is not None and stamped.num_rows == 6
    assert without_trace(stamped).schema.metadata is None
    assert batch_context(batch) is None


class _ProducingPartition(StatelessSinkPartition[pa.RecordBatch]):
    """Produces one record per batch, with the headers inject_headers gives it."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap})

    def write_batch(self, items: list[pa.RecordBatch]) -> None:
        for batch in items:
            headers: list[tuple[str, str | bytes | None]] = list(
                inject_headers(batch, topic=self.topic, step_id="out")
            )
            self.producer.produce(self.topic, value=str(batch.num_rows).encode(), headers=headers)
        self.producer.flush(30)

    def close(self) -> None:
        self.producer.flush(30)


class _ProducingSink(DynamicSink[pa.RecordBatch]):
    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _ProducingPartition:
        return _ProducingPartition(self.bootstrap, self.topic)


def test_an_upstream_trace_continues_through_consumer_operators_and_producer(
    kafka_bootstrap, make_topic, tmp_path: Path
) -> None:
    provider, exporter = traced_provider()
    upstream = provider.get_tracer("checkout-service")
    topic_in, topic_out = make_topic(), make_topic()
    origin = produce_traced_orders(kafka_bootstrap, topic_in, 20, upstream)
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "1.avsc").write_text(json.dumps(ORDER_AVRO_SCHEMA))
    exporter.clear()
    observe(tracing_provider=provider)

    flow = Dataflow("traced")
    raw = op.input("in", flow, KafkaSource(kafka_bootstrap, topic_in, tail=False))
    decoded = twg.decode("decode", raw, AvroCodec(schemas))
    checked = twg.validate("validate", decoded.ok, None, rules=[Rule.not_null("order_id")])
    values = op.map("values", checked.clean, lambda kv: kv[1])
    op.output("out", values, _ProducingSink(kafka_bootstrap, topic_out))
    run_main(flow)

    spans = {s.name: s for s in exporter.get_finished_spans()}
    receive = spans[f"receive {topic_in}"]
    decode = spans["decode traced.decode"]
    validate = spans["validate traced.validate"]
    send = spans[f"send {topic_out}"]
    chain = [receive, decode, validate, send]
    assert {s.context.trace_id for s in chain} == {origin.trace_id}
    assert receive.parent is not None and receive.parent.span_id == origin.span_id
    assert decode.parent is not None and decode.parent.span_id == receive.context.span_id
    assert validate.parent is not None and validate.parent.span_id == decode.context.span_id
    assert send.parent is not None and send.parent.span_id == validate.context.span_id
    assert send.kind is SpanKind.PRODUCER

    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": uuid.uuid4().hex})
    # Assigned, not subscribed: a group's first join waits out the broker's initial
    # rebalance delay (3 s on the mock cluster).
    partitions = consumer.list_topics(topic_out, timeout=10).topics[topic_out].partitions
    consumer.assign([TopicPartition(topic_out, p, OFFSET_BEGINNING) for p in partitions])
    msg = None
    for _ in range(60):
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            break
    consumer.close()
    assert msg is not None and msg.error() is None
    assert trace_id_of(msg.headers()) == origin.trace_id
