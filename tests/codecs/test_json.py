"""JsonCodec: JSON Schema mapping, columnar vs per-value agreement, bad input."""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.budget import examples
from thalweg_bytewax.codecs import FailureKind
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.codecs.json import JsonCodec, JsonDecodeError
from thalweg_bytewax.dev.samples import sample_orders
from thalweg_bytewax.errors import ConfigError, SchemaError

# Every test runs on each columnar reader (tests/codecs/conftest.py).
pytestmark = pytest.mark.usefixtures("json_engine")

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "at", "tags", "line"],
    "$defs": {"money": {"type": "object", "properties": {"units": {"type": "integer"}}}},
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": ["string", "null"]},
        "score": {"type": "number"},
        "ok": {"type": "boolean"},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "status": {"enum": ["A", "B"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "line": {
            "type": "object",
            "required": ["sku"],
            "properties": {"sku": {"type": "string"}, "price": {"$ref": "#/$defs/money"}},
        },
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["q"],
                "properties": {"q": {"type": "integer"}},
            },
        },
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    },
}
# pyarrow.json cannot read maps, so a schema with one takes the orjson path; every
# behaviour test runs on both the columnar (no map) and the per-record schema.
COLUMNAR = {
    **SCHEMA,
    "properties": {k: v for k, v in SCHEMA["properties"].items() if k != "counts"},
}
BOTH = pytest.mark.parametrize("schema", [COLUMNAR, SCHEMA], ids=["columnar", "with_map"])
MONEY = pa.struct([pa.field("units", pa.int64())])
WANT = pa.schema(
    [
        pa.field("id", pa.int64(), False),
        pa.field("name", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("ok", pa.bool_()),
        pa.field("at", pa.timestamp("us", tz="UTC"), False),
        pa.field("day", pa.date32()),
        pa.field("status", pa.string()),
        pa.field("tags", pa.list_(pa.string()), False),
        pa.field("counts", pa.map_(pa.string(), pa.int64())),
        pa.field(
            "line",
            pa.struct([pa.field("sku", pa.string(), False), pa.field("price", MONEY)]),
            False,
        ),
        pa.field("lines", pa.list_(pa.struct([pa.field("q", pa.int64(), False)]))),
        pa.field("maybe", pa.int64()),
    ]
)
GOOD: dict[str, Any] = {
    "id": 1,
    "name": "n",
    "score": 2,
    "ok": True,
    "at": "2026-01-01T10:00:00.5+02:00",
    "day": "2026-02-03",
    "status": "A",
    "tags": ["x", None],
    "counts": {"a": 1},
    "line": {"sku": "s", "price": {"units": 5}},
    "lines": [{"q": 1}],
    "maybe": None,
}


def dumps(doc: Any) -> bytes:
    return orjson.dumps(doc)


def test_schema_mapping_is_exact() -> None:
    c = JsonCodec(schema=SCHEMA)
    assert c.arrow_schema.equals(WANT), c.arrow_schema
    assert c.name == "json"
    assert JsonCodec(schema=WANT).arrow_schema.equals(WANT)


@BOTH
def test_good_document_both_paths(schema: dict[str, Any]) -> None:
    c = JsonCodec(schema=schema)
    good = {k: v for k, v in GOOD.items() if k in schema["properties"]}
    row = c.decode_batch([dumps(good)]).batch.to_pylist(maps_as_pydicts="strict")[0]
    assert row == c.decode_value(dumps(good))
    assert row["at"] == datetime(2026, 1, 1, 8, 0, 0, 500000, tzinfo=UTC)
    assert row["day"] == date(2026, 2, 3) and row["score"] == 2.0
    assert row.get("counts", {"a": 1}) == {"a": 1} and row["line"]["price"] == {"units": 5}


BAD: list[tuple[Any, FailureKind, str]] = [
    (b'{"id": 1, "at": ', FailureKind.MALFORMED, "malformed"),
    ({**GOOD, "id": "7"}, FailureKind.SCHEMA_MISMATCH, "`id`: expected an integer"),
    ({**GOOD, "id": 1.5}, FailureKind.SCHEMA_MISMATCH, "`id`"),
    ({k: v for k, v in GOOD.items() if k != "tags"}, FailureKind.SCHEMA_MISMATCH, "`tags`: required; got missing"),
    ({**GOOD, "line": {"price": {"units": 1}}}, FailureKind.SCHEMA_MISMATCH, "`line.sku`: required"),
    ({**GOOD, "lines": [{"q": 1}, {}]}, FailureKind.SCHEMA_MISMATCH, "`lines[].q`: required"),
    ({**GOOD, "at": "2026-01-01 10:00:00"}, FailureKind.SCHEMA_MISMATCH, "`at`: expected an RFC 3339"),
    ({**GOOD, "day": "03/02/2026"}, FailureKind.SCHEMA_MISMATCH, "`day`"),
    ({**GOOD, "maybe": "x"}, FailureKind.SCHEMA_MISMATCH, "`maybe`"),
    ({**GOOD, "_twg_offset": 3}, FailureKind.RESERVED_FIELD, "`_twg_offset`"),
    ([1, 2], FailureKind.SCHEMA_MISMATCH, "expected an object"),
    (None, FailureKind.NULL_PAYLOAD, "null"),
    (b"", FailureKind.MALFORMED, "malformed"),
]  # fmt: skip


def _payload(doc: Any) -> bytes | None:
    return doc if doc is None or isinstance(doc, bytes) else dumps(doc)


@BOTH
def test_bad_rows_fail_with_kind_and_field_and_good_rows_survive(schema: dict[str, Any]) -> None:
    c = JsonCodec(schema=schema)
    payloads: list[bytes | None] = [dumps(GOOD)]
    for doc, _, _ in BAD:
        payloads += [_payload(doc), dumps({**GOOD, "id": 2})]
    res = c.decode_batch(pa.array(payloads, pa.binary()))
    assert res.batch.num_rows == len(BAD) + 1
    assert [e.index for e in res.errors] == list(range(1, 2 * len(BAD), 2))
    for err, (doc, kind, text) in zip(res.errors, BAD, strict=True):
        assert err.kind is kind, err
        assert text in err.message, err
        assert err.message[0].islower() and not err.message.endswith(".")
        with pytest.raises(JsonDecodeError) as info:
            c.decode_value(_payload(doc))  # type: ignore[arg-type]
        assert info.value.kind is kind


def test_additional_properties_false_rejects_unknown_keys() -> None:
    strict = {**SCHEMA, "additionalProperties": False}
    c = JsonCodec(schema=strict)
    res = c.decode_batch([dumps(GOOD), dumps({**GOOD, "zz": 1})])
    assert res.batch.num_rows == 1
    assert res.errors[0].kind is FailureKind.SCHEMA_MISMATCH and "`zz`" in res.errors[0].message
    assert JsonCodec(schema=SCHEMA).decode_batch([dumps({**GOOD, "zz": 1})]).errors == []


@BOTH
def test_pretty_printed_and_confluent_framed_documents(schema: dict[str, Any]) -> None:
    pretty = orjson.dumps(GOOD, option=orjson.OPT_INDENT_2)
    c = JsonCodec(schema=schema, framing="confluent")
    res = c.decode_batch([encode_confluent(3, pretty), b"\x01" + encode_confluent(3, pretty)[1:]])
    assert res.batch.num_rows == 1 and res.batch.to_pylist()[0]["id"] == 1
    assert res.errors[0].kind is FailureKind.BAD_FRAMING
    assert c.decode_value(encode_confluent(3, dumps(GOOD)))["id"] == 1


@BOTH
def test_two_documents_in_one_payload_is_malformed(schema: dict[str, Any]) -> None:
    c = JsonCodec(schema=schema)
    res = c.decode_batch([dumps(GOOD) + dumps(GOOD), dumps(GOOD)])
    assert [e.index for e in res.errors] == [0] and res.errors[0].kind is FailureKind.MALFORMED


def test_reserved_field_in_schema_fails_every_row() -> None:
    schema = {"type": "object", "properties": {"_twg_x": {"type": "integer"}}}
    res = JsonCodec(schema=schema).decode_batch([b'{"_twg_x": 1}', b"{}"])
    assert [e.kind for e in res.errors] == [FailureKind.RESERVED_FIELD] * 2
    assert JsonCodec(schema=schema, metadata_prefix="_m_").decode_value(b'{"_twg_x": 1}') == {
        "_twg_x": 1
    }


def test_infer_is_explicit_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "thalweg_bytewax"):
        c = JsonCodec(schema="infer")
    assert any("inferred" in r.getMessage() for r in caplog.records)
    with pytest.raises(SchemaError):
        _ = c.arrow_schema
    res = c.decode_batch([b'{"a": 1, "b": "x"}'])
    assert c.arrow_schema.names == ["a", "b"] and res.batch.num_rows == 1


def test_schema_from_path_and_config_errors(tmp_path: Any) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(dumps(SCHEMA))
    assert JsonCodec(schema=path).arrow_schema.equals(WANT)
    with pytest.raises(ConfigError, match="framing"):
        JsonCodec(schema=SCHEMA, framing="xml")
    with pytest.raises(SchemaError, match="`x`: expected one non-null type"):
        JsonCodec(schema={"type": "object", "properties": {"x": {"type": ["string", "integer"]}}})
    with pytest.raises(SchemaError, match="`x`: expected `items`"):
        JsonCodec(schema={"type": "object", "properties": {"x": {"type": "array"}}})


def test_sample_orders_decode() -> None:
    schema = {
        "type": "object",
        "required": ["order_id", "customer_id", "created_at", "items"],
        "properties": {
            "order_id": {"type": "string", "format": "uuid"},
            "customer_id": {"type": "integer"},
            "created_at": {"type": "string", "format": "date-time"},
            "total": {"type": "string"},
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "sku": {"type": "string"}, "quantity": {"type": "integer"}}}},
            "coupon": {"type": ["string", "null"]},
        },
    }  # fmt: skip
    orders = list(sample_orders(200))
    res = JsonCodec(schema=schema).decode_batch([orjson.dumps(o, default=str) for o in orders])
    assert res.errors == []
    rows = res.batch.to_pylist()
    assert [r["created_at"] for r in rows] == [o["created_at"] for o in orders]
    assert [r["total"] for r in rows] == [str(o["total"]) for o in orders]


# ------------------------------------------------------------------ properties
_text = st.text(max_size=6)
_value = {
    "id": st.integers(-(2**63), 2**63 - 1),
    "name": st.none() | _text,
    "score": st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**53), 2**53),
    "ok": st.booleans(),
    "at": st.datetimes(
        min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
    ).map(lambda d: d.isoformat()),
    "day": st.dates(min_value=date(1, 1, 1)).map(lambda d: d.isoformat()),
    "status": st.sampled_from(["A", "B"]),
    "tags": st.lists(st.none() | _text, max_size=3),
    "counts": st.dictionaries(_text, st.integers(-5, 5), max_size=3),
    "line": st.fixed_dictionaries({"sku": _text}, optional={"price": st.fixed_dictionaries({"units": st.integers(0, 9)})}),
    "lines": st.lists(st.fixed_dictionaries({"q": st.integers(0, 9)}), max_size=3),
    "maybe": st.none() | st.integers(-9, 9),
}  # fmt: skip
_required = {"id", "at", "tags", "line"}
documents = st.fixed_dictionaries(
    {k: v for k, v in _value.items() if k in _required},
    optional={k: v for k, v in _value.items() if k not in _required},
)
_wrong = st.sampled_from([1, "x", 1.5, True, [1], {"a": 1}, None])


@BOTH
@settings(max_examples=examples(100))
@given(docs=st.lists(documents, min_size=1, max_size=8))
def test_random_valid_documents_agree_across_paths(
    schema: dict[str, Any], docs: list[dict[str, Any]]
) -> None:
    c = JsonCodec(schema=schema)
    if "counts" not in schema["properties"]:
        docs = [{k: v for k, v in d.items() if k != "counts"} for d in docs]
    payloads = [dumps(d) for d in docs]
    res = c.decode_batch(payloads)
    assert res.errors == []
    assert res.batch.schema.equals(c.arrow_schema)
    rows = res.batch.to_pylist(maps_as_pydicts="strict")
    assert rows == [c.decode_value(p) for p in payloads]
    for d, row in zip(docs, rows, strict=True):
        assert row["id"] == d["id"] and row["tags"] == d["tags"]


@BOTH
@settings(max_examples=examples(100))
@given(
    cases=st.lists(
        st.tuples(documents, st.sampled_from(sorted(_value)), _wrong), min_size=1, max_size=6
    )
)
def test_random_corrupted_documents_agree_across_paths(
    schema: dict[str, Any], cases: list[tuple[dict[str, Any], str, Any]]
) -> None:
    c = JsonCodec(schema=schema)
    payloads = [dumps({**d, key: bad}) for d, key, bad in cases]
    res = c.decode_batch(payloads)
    by_index = {e.index: e for e in res.errors}
    rows = iter(res.batch.to_pylist(maps_as_pydicts="strict"))
    for i, p in enumerate(payloads):
        try:
            value = c.decode_value(p)
        except JsonDecodeError as exc:
            assert (
                i in by_index and by_index[i].kind is exc.kind and by_index[i].message == str(exc)
            )
        else:
            assert i not in by_index, by_index[i]
            assert next(rows) == value


def test_rows_never_borrow_from_their_neighbours() -> None:
    # The columnar reader parses documents across whitespace, so a row holding one and a
    # half documents plus a row holding the rest would read as two aligned documents.
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    c = JsonCodec(schema=schema)
    payloads = [b'{"a":1}{"b":', b"2}", b'{"a":3}', b' {"a":4} ', b"[5]", b'{"a":"}', b'{"}']
    res = c.decode_batch(pa.array(payloads, pa.binary()))
    assert res.batch.to_pylist() == [{"a": 3, "b": None}, {"a": 4, "b": None}]
    assert [e.index for e in res.errors] == [0, 1, 4, 5, 6]
    for e in res.errors:
        with pytest.raises(JsonDecodeError) as info:
            c.decode_value(payloads[e.index])
        assert info.value.kind is e.kind


def test_arrow_schema_types_beyond_json_schema_are_kept() -> None:
    # What a data contract declares: list child names, int32, decimals, ms timestamps.
    want = pa.schema(
        [
            pa.field("xs", pa.list_(pa.field("element", pa.int32(), False)), False),
            pa.field("d", pa.decimal128(5, 1)),
            pa.field("t", pa.timestamp("ms", tz="UTC")),
        ]
    )
    c = JsonCodec(schema=want)
    good = b'{"xs": [1, 2], "d": "12.5", "t": "2026-01-01T00:00:00.001+00:00"}'
    res = c.decode_batch([good, b'{"xs": [null]}', b'{"xs": [], "d": "1.25"}'])
    assert res.batch.schema.equals(want) and res.batch.num_rows == 1
    assert res.batch.to_pylist() == [c.decode_value(good)]
    assert [e.message for e in res.errors] == [
        "json field `xs[]`: required; got null",
        "json field `d`: expected a decimal (decimal128(5, 1)) string; got '1.25'",
    ]


def test_repeated_key_decodes_alike_on_both_paths() -> None:
    # read_json refuses a repeated key; orjson keeps the last value: the row is decoded
    # by the per-value path instead of failing on one path only.
    c = JsonCodec(schema=pa.schema([pa.field("a", pa.int64())]))
    payloads = [b'{"a": 1, "a": 2}', b'{"a": 3}', b'{"a": 1, "a": "x"}']
    res = c.decode_batch(payloads)
    assert (
        res.batch.to_pylist() == [{"a": 2}, {"a": 3}] == [c.decode_value(p) for p in payloads[:2]]
    )
    assert [e.index for e in res.errors] == [2] and "`a`: expected an integer" in res.errors[
        0
    ].message


def test_a_local_time_column_refuses_instants_saying_what_it_takes() -> None:
    codec = JsonCodec(pa.schema([("ts", pa.timestamp("us")), ("n", pa.int64())]))
    values = [
        b'{"ts": "2026-01-01T10:00:00", "n": 1}',
        b'{"ts": "2026-01-01T10:00:00Z", "n": 2}',
        b'{"ts": "2026-01-01T10:00:00+02:00", "n": 3}',
    ]
    result = codec.decode_batch(values)
    assert result.batch.column("n").to_pylist() == [1]
    assert result.batch.column("ts").to_pylist() == [datetime(2026, 1, 1, 10)]
    assert [e.index for e in result.errors] == [1, 2]
    for e in result.errors:
        assert e.kind is FailureKind.SCHEMA_MISMATCH
        assert "expected a date-time string without offset" in e.message
        assert "tz='UTC'" in e.message
    # The same column declared with a zone takes every instant.
    zoned = JsonCodec(pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("n", pa.int64())]))
    assert zoned.decode_batch(values[1:]).batch.num_rows == 2
