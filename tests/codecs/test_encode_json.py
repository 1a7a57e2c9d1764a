"""``JsonEncoder``: exact JSON that decodes back to the batch; Confluent reads it.

Round trips run on the decoder's own random documents (``test_json``) and on random
batches of the Arrow types beyond JSON Schema (decimals, ms / naive timestamps, float32,
uint64): ``JsonCodec.decode_batch(JsonEncoder.encode_batch(batch)) == batch``.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.codecs.test_json import SCHEMA, documents
from tests.fixtures.budget import examples
from thalweg_bytewax.codecs import EncodeError, Encoder, JsonCodec, JsonEncoder
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.registry import registry_client

UTC = dt.UTC
WIDE = pa.schema(
    [
        pa.field("d", pa.decimal128(12, 3)),
        pa.field("big", pa.decimal128(38, 0)),
        pa.field("ms", pa.timestamp("ms", tz="UTC")),
        pa.field("naive", pa.timestamp("us")),
        pa.field("f32", pa.float32()),
        pa.field("f64", pa.float64()),
        pa.field("u", pa.uint64()),
        pa.field("i8", pa.int8()),
        pa.field("day", pa.date32()),
        pa.field("xs", pa.list_(pa.field("element", pa.int32(), False)), False),
        pa.field("m", pa.map_(pa.string(), pa.decimal128(5, 1))),
        pa.field("s", pa.struct([pa.field("t", pa.string()), pa.field("b", pa.bool_())])),
    ]
)
_wide_row = st.fixed_dictionaries(
    {
        "d": st.none() | st.decimals(-(10**9) + 1, 10**9 - 1, places=3),
        "big": st.none() | st.integers(-(10**38) + 1, 10**38 - 1).map(Decimal),
        "ms": st.none()
        | st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30), timezones=st.just(UTC)).map(
            lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)
        ),
        "naive": st.none() | st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)),
        "f32": st.none() | st.floats(width=32, allow_nan=False, allow_infinity=False),
        "f64": st.none() | st.floats(allow_nan=False, allow_infinity=False),
        "u": st.none() | st.integers(0, 2**64 - 1),
        "i8": st.none() | st.integers(-128, 127),
        "day": st.none() | st.dates(),
        "xs": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=3),
        "m": st.none()
        | st.dictionaries(
            st.text(max_size=4), st.none() | st.decimals(-9999, 9999, places=1), max_size=3
        ),
        "s": st.none()
        | st.fixed_dictionaries(
            {"t": st.none() | st.text(max_size=6), "b": st.none() | st.booleans()}
        ),
    }
)


@settings(max_examples=examples(60), deadline=None)
@given(docs=st.lists(documents, min_size=1, max_size=8))
def test_decoder_documents_round_trip(docs: list[dict[str, Any]]) -> None:
    codec = JsonCodec(schema=SCHEMA)
    batch = codec.decode_batch([json.dumps(d).encode() for d in docs]).batch
    out = JsonEncoder(schema=SCHEMA).encode_batch(batch, topic="t")
    back = codec.decode_batch(out.values)
    assert back.errors == []
    assert back.batch.equals(batch)


@settings(max_examples=examples(60), deadline=None)
@given(rows=st.lists(_wide_row, min_size=1, max_size=8))
def test_arrow_types_beyond_json_schema_round_trip(rows: list[dict[str, Any]]) -> None:
    batch = pa.RecordBatch.from_pylist(rows, schema=WIDE)
    out = JsonEncoder().encode_batch(batch, topic="t")
    back = JsonCodec(schema=WIDE).decode_batch(out.values)
    assert back.errors == []
    assert back.batch.equals(batch)


def test_exact_text_forms() -> None:
    batch = pa.RecordBatch.from_pylist(
        [
            {
                "d": Decimal("-0.100"),
                "ms": dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
                "naive": dt.datetime(2024, 1, 2, 3, 4, 5, 6),
                "f32": 0.5,
                "u": 2**64 - 1,
                "day": dt.date(2024, 2, 29),
                "bin": b"\x00\xff",
            }
        ],
        schema=pa.schema(
            [
                ("d", pa.decimal128(5, 3)),
                ("ms", pa.timestamp("ms", tz="UTC")),
                ("naive", pa.timestamp("us")),
                ("f32", pa.float32()),
                ("u", pa.uint64()),
                ("day", pa.date32()),
                ("bin", pa.binary()),
            ]
        ),
    )
    doc = json.loads(JsonEncoder().encode_batch(batch, topic="t").values[0].as_py())
    assert doc == {
        "d": "-0.100",
        "ms": "1969-12-31T23:59:59.999Z",
        "naive": "2024-01-02T03:04:05.000006",
        "f32": 0.5,
        "u": 2**64 - 1,
        "day": "2024-02-29",
        "bin": "AP8=",
    }


def test_nan_policy_and_metadata_columns() -> None:
    batch = pa.record_batch(
        {"x": pa.array([1.0, float("nan"), float("-inf")]), "_twg_source_offset": [1, 2, 3]}
    )
    with pytest.raises(
        EncodeError,
        match=r"column `x` row 1: expected a finite number .*; got nan; pass `nan='null'`",
    ) as info:
        JsonEncoder().encode_batch(batch, topic="t")
    assert (info.value.column, info.value.row) == ("x", 1)
    out = JsonEncoder(nan="null").encode_batch(batch, topic="t")
    assert out.values.to_pylist() == [b'{"x":1.0}', b'{"x":null}', b'{"x":null}']
    nested = pa.record_batch({"l": pa.array([[1.0], [2.0, float("inf")]])})
    with pytest.raises(EncodeError, match=r"column `l\[\]` row 1: .*; got inf"):
        JsonEncoder().encode_batch(nested, topic="t")
    with pytest.raises(ConfigError, match="nan"):
        JsonEncoder(nan="zero")  # type: ignore[arg-type]


def test_schema_violations_name_column_and_row() -> None:
    codec = JsonCodec(schema=SCHEMA)
    good = codec.decode_batch(
        [
            json.dumps(
                {"id": 1, "at": "2024-01-01T00:00:00Z", "tags": [], "line": {"sku": "a"}}
            ).encode()
        ]
    ).batch
    enc = JsonEncoder(schema=SCHEMA)
    with pytest.raises(EncodeError, match="expected column `id`"):
        enc.encode_batch(good.drop_columns(["id"]), topic="t")
    bad = pa.record_batch(
        {
            "id": pa.array([1, None]),
            "at": pa.array([dt.datetime(2024, 1, 1, tzinfo=UTC)] * 2),
            "tags": [[], []],
            "line": [{"sku": "a"}] * 2,
        }
    )
    with pytest.raises(EncodeError, match="column `id` row 1: expected a value") as info:
        enc.encode_batch(bad, topic="t")
    assert info.value.row == 1
    wrong = bad.set_column(0, "id", pa.array(["1", "x"]))
    with pytest.raises(
        EncodeError, match="column `id` row 1: expected a value of `int64`; got 'x'"
    ):
        enc.encode_batch(wrong, topic="t")


def test_confluent_json_deserializer_reads_payload_and_header_framing() -> None:
    url = f"mock://encode-json-{uuid.uuid4().hex}"
    docs = [
        {"id": i, "at": f"2024-01-0{i + 1}T00:00:00Z", "tags": ["a"] * i, "line": {"sku": f"s{i}"}}
        for i in range(4)
    ]
    codec = JsonCodec(schema=SCHEMA)
    batch = codec.decode_batch([json.dumps(d).encode() for d in docs]).batch
    deser = JSONDeserializer(None, schema_registry_client=registry_client(url))
    for where in ("payload", "header"):
        enc = JsonEncoder(
            url, schema=SCHEMA, auto_register=True, framing="confluent", schema_id_in=where
        )
        assert isinstance(enc, Encoder)
        out = enc.encode_batch(batch, topic="orders")
        for i, value in enumerate(out.values.to_pylist()):
            headers: list[tuple[str, str | bytes | None]] | None = (
                None if out.headers is None else [(k, v) for k, v in out.headers[i]]
            )
            got = deser(value, SerializationContext("orders", MessageField.VALUE, headers))
            assert got["id"] == i and got["line"]["sku"] == f"s{i}" and got["tags"] == ["a"] * i
        back = JsonCodec(schema=SCHEMA, framing="confluent").decode_batch(
            out.values
            if where == "payload"
            else [b"\x00\x00\x00\x00\x01" + v for v in out.values.to_pylist()]
        )
        assert back.batch.equals(batch)
    latest = JsonEncoder(url, framing="confluent")
    assert (
        latest.encode_batch(batch, topic="orders").values.to_pylist()
        == JsonEncoder(url, schema=SCHEMA, framing="confluent")
        .encode_batch(batch, topic="orders")
        .values.to_pylist()
    )
