"""decode(): good rows to `ok`, bad rows to the DLQ, in real Bytewax runs."""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
import fastavro
import orjson
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.errors import BytewaxRuntimeError
from bytewax.testing import TestingSink, TestingSource, run_main

import thalweg_bytewax.operators as twg
from tests.fixtures.flows import EntryPoint
from tests.helpers import cause_of, locator_of, raw_values, run_flow
from thalweg_bytewax.codecs import AvroCodec, JsonCodec, ProtobufCodec
from thalweg_bytewax.codecs.base import DecodeFailure, DecodeResult, FailureKind
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.dev.samples import (
    ORDER_AVRO_SCHEMA,
    ORDER_MESSAGE_TYPE,
    encode_order_avro,
    encode_order_proto,
    order_descriptor_set,
    order_key,
    sample_orders,
)
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.lanes.dlq import dlq_schema, rejected_from_dlq_batch
from thalweg_bytewax.records.metadata import MetadataColumns, MetadataPolicy
from thalweg_bytewax.records.model import RawRecord
from thalweg_bytewax.registry import RegistrySchemaSource, RegistryUnavailableError
from thalweg_bytewax.testing import produce

COLS = MetadataColumns()
RESERVED_SCHEMA = {
    "type": "record",
    "name": "Sneaky",
    "fields": [{"name": "id", "type": "long"}, {"name": "_twg_source_offset", "type": "long"}],
}


@pytest.fixture
def schema_dir(tmp_path: Path) -> Path:
    d = tmp_path / "schemas"
    d.mkdir()
    (d / "1.avsc").write_text(json.dumps(ORDER_AVRO_SCHEMA))
    (d / "2.avsc").write_text(json.dumps(RESERVED_SCHEMA))
    return d


def run(items, codec, *, entry_point: EntryPoint = run_main, source_batch=1, **kwargs):
    got = run_flow(
        items,
        lambda up: twg.decode("decode", up, codec, **kwargs),
        flow_id="decode_test",
        entry_point=entry_point,
        source_batch=source_batch,
    )
    return got["ok"], got["rejected"]


def reserved_payload() -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(
        buf, fastavro.parse_schema(RESERVED_SCHEMA), {"id": 1, "_twg_source_offset": 9}
    )
    return encode_confluent(2, buf.getvalue())


def test_bad_records_go_to_the_dlq_and_good_ones_around_them_decode(schema_dir, entry_point):
    orders = list(sample_orders(12))
    encoded = [encode_order_avro(o) for o in orders]
    bad = {
        2: (encoded[2][:5] + b"\xff\xff\xff", "malformed"),
        4: (b"\x00" + (99).to_bytes(4, "big") + encoded[4][5:], "unknown_schema"),
        6: (None, "null_payload"),
        8: (b"\x07garbage", "bad_framing"),
        10: (reserved_payload(), "reserved_field"),
    }
    values: list[bytes | None] = list(encoded)
    for i, (v, _) in bad.items():
        values[i] = v
    batch = raw_values(values, partition=3, first=100)
    ok, rejected = run([("orders:3", batch)], AvroCodec(schema_dir), entry_point=entry_point)

    assert [k for k, _ in ok] == ["orders:3"] and [k for k, _ in rejected] == ["orders:3"]
    good = ok[0][1]
    good_idx = [i for i in range(12) if i not in bad]
    assert good[COLS.source_offset].to_pylist() == [100 + i for i in good_idx]
    assert good["order_id"].to_pylist() == [orders[i]["order_id"] for i in good_idx]
    assert good["total"].to_pylist() == [orders[i]["total"] for i in good_idx]
    assert good[COLS.record_id].to_pylist() == batch[COLS.record_id].take(good_idx).to_pylist()

    dlq = rejected[0][1]
    assert dlq.schema == dlq_schema()
    got = {locator_of(r).offset - 100: r for r in rejected_from_dlq_batch(dlq)}
    assert set(got) == set(bad)
    for i, (v, kind) in bad.items():
        r = got[i]
        assert r.locator is not None
        assert r.reason == "decode" and r.step_id == "decode_test.decode" and r.rules == ()
        assert r.raw_value == v and r.raw_key == f"k{i}".encode()
        assert r.locator.topic == "orders" and r.locator.partition == 3
        assert r.record_id == batch[COLS.record_id][i].as_py()
        assert f"`orders:3@{100 + i}`" in r.message and f"({kind})" in r.message, r.message
        assert r.message.startswith("avro decode failed")
    assert "schema id 99" in got[4].message
    assert "_twg_source_offset" in got[10].message


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("none", []),
        ("locator", COLS.locator_columns()),
        ("all", COLS.policy_columns("all")),
    ],
)
def test_metadata_policy_selects_the_columns_after_the_payload(schema_dir, policy, expected):
    orders = list(sample_orders(5))
    batch = raw_values([encode_order_avro(o) for o in orders])
    ok, rejected = run([("orders:0", batch)], AvroCodec(schema_dir), metadata=policy)
    assert rejected == []
    out = ok[0][1]
    payload = [f["name"] for f in ORDER_AVRO_SCHEMA["fields"]]
    assert out.schema.names == payload + expected
    for name in expected:  # taken from the RawBatch as is: same type, same values
        assert out.schema.field(name) == COLS.raw_schema.field(name)
        assert out[name] == batch[name]


def test_empty_batches_and_all_bad_batches(schema_dir):
    empty = raw_values([])
    all_bad = raw_values([None, None], partition=1)
    ok, rejected = run([("orders:0", empty), ("orders:1", all_bad)], AvroCodec(schema_dir))
    assert ok == []
    assert [(k, b.num_rows) for k, b in rejected] == [("orders:1", 2)]


def test_header_framing_uses_the_headers_column(tmp_path):
    guid = uuid.uuid4()
    d = tmp_path / "s"
    d.mkdir()
    (d / f"{guid}.avsc").write_text(json.dumps(ORDER_AVRO_SCHEMA))
    orders = list(sample_orders(3))
    bodies = [encode_order_avro(o)[5:] for o in orders]  # bare bodies
    headers = [[("__value_schema_id", b"\x01" + guid.bytes)] for _ in orders]
    ok, rejected = run([("orders:0", raw_values(bodies, headers=headers))], AvroCodec(d))
    assert rejected == []
    assert ok[0][1]["order_id"].to_pylist() == [o["order_id"] for o in orders]


def _json_schema() -> dict:
    return {
        "type": "object",
        "properties": {
            "order_id": {"type": "string"},
            "customer_id": {"type": "integer"},
            "created_at": {"type": "string", "format": "date-time"},
            "total": {"type": "string"},
        },
        "required": ["order_id", "customer_id", "created_at", "total"],
    }


def _json(order: dict) -> bytes:
    return orjson.dumps(
        {k: order[k] for k in ("order_id", "customer_id", "created_at", "total")}, default=str
    )


@pytest.mark.parametrize("codec_name", ["json", "protobuf"])
def test_json_and_protobuf_codecs_through_the_same_operator(codec_name, entry_point):
    orders = list(sample_orders(6))
    codec: JsonCodec | ProtobufCodec
    if codec_name == "json":
        codec = JsonCodec(_json_schema())
        values = [_json(o) for o in orders]
        values[3] = b'{"order_id": "x", "_twg_record_id": 1}'
        kinds = {3: "reserved_field"}
    else:
        codec = ProtobufCodec(
            descriptor_set=order_descriptor_set(), message_type=ORDER_MESSAGE_TYPE
        )
        values = [encode_order_proto(o) for o in orders]
        values[3] = values[3][:-4]
        kinds = {3: "malformed"}
    ok, rejected = run([("orders:0", raw_values(values))], codec, entry_point=entry_point)
    assert ok[0][1]["order_id"].to_pylist() == [
        o["order_id"] for i, o in enumerate(orders) if i != 3
    ]
    assert ok[0][1][COLS.source_offset].to_pylist() == [0, 1, 2, 4, 5]
    (r,) = rejected_from_dlq_batch(rejected[0][1])
    assert r.locator is not None
    assert r.locator.offset == 3 and f"({kinds[3]})" in r.message, r.message
    assert r.message.startswith(f"{codec_name} decode failed at `orders:0@3`")


def test_a_codec_with_another_prefix_still_cannot_shadow_metadata():
    codec = JsonCodec(
        pa.schema([pa.field("id", pa.int64()), pa.field("_twg_source_topic", pa.string())]),
        metadata_prefix="zz_",
    )
    ok, rejected = run([("t:0", raw_values([b'{"id": 1, "_twg_source_topic": "x"}'], topic="t"))], codec)
    assert ok == []
    (r,) = rejected_from_dlq_batch(rejected[0][1])
    assert "(reserved_field)" in r.message and "`_twg_source_topic`" in r.message


def test_an_unreachable_registry_fails_the_flow_loudly():
    source = RegistrySchemaSource("http://127.0.0.1:9", max_attempts=2, initial_backoff=timedelta(milliseconds=10))
    with pytest.raises(BytewaxRuntimeError) as info:
        run([("orders:0", raw_values([encode_order_avro(next(sample_orders(1)))]))], AvroCodec(source))
    assert "127.0.0.1:9" in str(cause_of(info.value, RegistryUnavailableError))


def test_build_time_errors():
    flow = Dataflow("bad")
    inp = op.input("inp", flow, TestingSource[tuple[str, pa.RecordBatch]]([]))
    with pytest.raises(ConfigError, match="expected metadata 'none', 'locator' or 'all'"):
        twg.decode("decode", inp, JsonCodec(_json_schema()), metadata="some")
    with pytest.raises(ConfigError, match="expected a codec with `decode_batch`"):
        twg.decode("decode2", inp, object())  # type: ignore[arg-type]  # not a codec, on purpose


def test_decode_over_kafka_source(kafka_bootstrap, make_topic, schema_dir, entry_point):
    topic = make_topic()
    orders = list(sample_orders(40))
    records = [
        {"key": order_key(o), "value": encode_order_avro(o), "partition": i % 2}
        for i, o in enumerate(orders)
    ]
    records[7]["value"] = None
    produce(kafka_bootstrap, topic, records)
    flow = Dataflow("decode_kafka")
    inp = op.input("inp", flow, KafkaSource(kafka_bootstrap, [topic], tail=False))
    out = twg.decode("decode", inp, AvroCodec(schema_dir))
    ok: list[tuple[str, pa.RecordBatch]] = []
    rejected: list[tuple[str, pa.RecordBatch]] = []
    op.output("ok", out.ok, TestingSink(ok))
    op.output("rejected", out.rejected, TestingSink(rejected))
    entry_point(flow)
    table = pa.Table.from_batches([b for _, b in ok])
    assert table.num_rows == 39
    assert {k for k, _ in ok} <= {f"{topic}:{p}" for p in range(4)}
    assert sorted(table["order_id"].to_pylist()) == sorted(
        o["order_id"] for i, o in enumerate(orders) if i != 7
    )
    (r,) = rejected_from_dlq_batch(rejected[0][1])
    assert r.raw_value is None and r.raw_key == order_key(orders[7])
    assert r.locator is not None
    assert "(null_payload)" in r.message and r.locator.topic == topic


def test_to_raw_records_and_to_dicts(schema_dir, entry_point):
    orders = list(sample_orders(4))
    batch = raw_values([encode_order_avro(o) for o in orders], partition=2)
    flow = Dataflow("records_test")
    inp = op.input("inp", flow, TestingSource([("orders:2", batch)]))
    records: list[tuple[str, RawRecord]] = []
    dicts: list[tuple[str, dict[str, Any]]] = []
    bare: list[tuple[str, dict[str, Any]]] = []
    op.output("records_out", twg.to_raw_records("records", inp), TestingSink(records))
    decoded = twg.decode("decode", inp, AvroCodec(schema_dir))
    op.output("dicts_out", twg.to_dicts("dicts", decoded.ok), TestingSink(dicts))
    op.output("bare_out", twg.to_dicts("bare", decoded.ok, metadata="none"), TestingSink(bare))
    entry_point(flow)
    assert [k for k, _ in records] == ["orders:2"] * 4
    assert [r.value for _, r in records] == batch[COLS.source_value].to_pylist()
    assert [r.locator.offset for _, r in records] == [0, 1, 2, 3]
    assert records[1][1].key == b"k1" and records[1][1].locator.cluster == "test"
    assert [k for k, _ in dicts] == ["orders:2"] * 4
    assert dicts[0][1][COLS.source_offset] == 0
    expected = [dict(o, created_at=o["created_at"]) for o in orders]
    assert [d for _, d in bare] == expected


def test_decoded_batches_write_to_parquet_with_null_nested_records(schema_dir):
    # ~10% of sample orders have no shipping address (a null struct with required
    # children): the columnar path must hand Parquet a batch it accepts.
    import pyarrow.parquet as pq

    orders = list(sample_orders(300))
    assert any(o["shipping_address"] is None for o in orders)
    ok, _ = run([("orders:0", raw_values([encode_order_avro(o) for o in orders]))], AvroCodec(schema_dir))
    batch = ok[0][1]
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_batches([batch]), sink)
    back = pq.read_table(pa.BufferReader(sink.getvalue()))
    assert back["shipping_address"].to_pylist() == [o["shipping_address"] for o in orders]


def test_json_decoded_batches_write_to_parquet_with_null_nested_objects():
    import pyarrow.parquet as pq

    schema = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "address": {
                "type": ["object", "null"],
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
        "required": ["id"],
    }
    values = [
        b'{"id": 1, "address": {"city": "Graz"}}',
        b'{"id": 2, "address": null}',
        b'{"id": 3}',
    ]
    ok, rejected = run([("t:0", raw_values(values, topic="t"))], JsonCodec(schema))
    assert rejected == []
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_batches([ok[0][1]]), sink)
    back = pq.read_table(pa.BufferReader(sink.getvalue()))
    assert back["address"].to_pylist() == [{"city": "Graz"}, None, None]


def test_docs_example_runs():
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "operators.md").read_text()
    match = re.search(r"```python\n(.*?)```", text[text.index("## `decode(") :], re.S)
    assert match is not None, "no python example under `decode(`"
    example = match.group(1)
    exec(compile(example, "docs/operators.md", "exec"), {})


class _MisreportingCodec:
    """A codec whose failures name the given row indices, whatever the payloads."""

    name = "misreporting"

    def __init__(self, indices, rows):
        self._indices, self._rows = indices, rows

    def decode_batch(self, payloads, *, headers=None):
        batch = pa.RecordBatch.from_pydict({"id": pa.array(range(self._rows), pa.int64())})
        errors = [DecodeFailure(i, FailureKind.MALFORMED, "bad") for i in self._indices]
        return DecodeResult(batch, errors)


@pytest.mark.parametrize(
    ("indices", "rows", "problem"),
    [
        # The row count adds up (3 - 1 distinct failed row), yet row 1 would be written
        # to the DLQ twice.
        ([1, 1], 2, "row 1 as failed 2 times"),
        ([3], 2, "a failure at row 3, outside the batch of 3 payloads"),
        # -1 would blame the last row, which decoded.
        ([-1], 2, "a failure at row -1, outside the batch of 3 payloads"),
    ],
)
def test_a_codec_reporting_bad_failure_indices_fails_loudly(indices, rows, problem):
    codec = _MisreportingCodec(indices, rows)
    with pytest.raises(BytewaxRuntimeError) as info:
        run([("orders:0", raw_values([b"a", b"b", b"c"]))], codec)
    loud = cause_of(info.value, SchemaError)
    assert f"codec `misreporting` reported {problem};" in str(loud)
    assert "(a codec bug)" in str(loud)


def test_a_codec_reporting_distinct_in_range_failures_is_trusted():
    ok, rejected = run([("orders:0", raw_values([b"a", b"b", b"c"]))], _MisreportingCodec([2, 0], 1))
    assert ok[0][1].column("id").to_pylist() == [0]
    assert [locator_of(r).offset for r in rejected_from_dlq_batch(rejected[0][1])] == [2, 0]


def test_batches_of_one_activation_decode_concurrently_and_in_order(entry_point):
    # TestingSource hands the step several batches at once: a JsonCodec with the native
    # reader decodes them on the shared pool; keys and order come out as they went in.
    orders = list(sample_orders(40))
    items = []
    for part in range(8):
        values = [_json(o) for o in orders[part * 5 : part * 5 + 5]]
        values[part % 5] = b'{"order_id": 7}'  # one bad record per batch
        items.append((f"orders:{part}", raw_values(values, partition=part, first=100 * part)))
    codec = JsonCodec(_json_schema())
    sequential = JsonCodec(_json_schema(), engine="pyarrow")
    assert codec.concurrent_batches is json_native_built()
    assert not sequential.concurrent_batches
    ok, rejected = run(items, codec, entry_point=entry_point, source_batch=8)
    ok_seq, rejected_seq = run(items, sequential, entry_point=entry_point, source_batch=8)
    assert [k for k, _ in ok] == [k for k, _ in ok_seq] == [f"orders:{p}" for p in range(8)]
    assert all(a.equals(b) for (_, a), (_, b) in zip(ok, ok_seq, strict=True))
    assert [locator_of(r).offset for _, b in rejected for r in rejected_from_dlq_batch(b)] == [
        100 * p + p % 5 for p in range(8)
    ]
    assert len(rejected) == len(rejected_seq) == 8


def json_native_built() -> bool:
    from thalweg_bytewax.codecs._json_fast import NATIVE

    return NATIVE


def test_only_a_true_concurrent_batches_property_opts_in(monkeypatch):
    import thalweg_bytewax.operators.decoding as decoding

    class MethodNotProperty(JsonCodec):
        # A method is truthy: it must not opt in. (Incompatible with the base's property
        # on purpose: the override is what the test feeds the operator.)
        def concurrent_batches(self):  # type: ignore[override]
            return False

    def no_pool():
        raise AssertionError("decoded on the pool")

    monkeypatch.setattr(decoding, "_pool", no_pool)
    items = [(f"orders:{p}", raw_values([_json(o)], partition=p)) for p, o in enumerate(sample_orders(3))]
    decoder = decoding._Decoder(
        "d", MethodNotProperty(_json_schema()), MetadataPolicy.LOCATOR, COLS
    )
    out = decoder.run_many(items)
    assert [k for k, _ in out] == ["orders:0", "orders:1", "orders:2"]
    assert all(d.ok is not None and d.ok.num_rows == 1 for _, d in out)
