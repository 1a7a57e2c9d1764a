"""JsonCodec's columnar readers on damaged and unusual bytes: they agree with decode_value.

The native reader parses bytes itself, so every way a document can be cut, spliced or
garbled must either decode exactly as ``decode_value`` does or fail with its message.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.codecs.json_agreement import SCHEMA as BASE
from tests.codecs.json_agreement import assert_agrees
from tests.fixtures.budget import examples
from thalweg_bytewax.codecs._json_fast import NATIVE
from thalweg_bytewax.codecs.json import JsonCodec
from thalweg_bytewax.dev.samples import ORDER_JSON_SCHEMA, sample_orders
from thalweg_bytewax.errors import ConfigError, SchemaError

# Every test runs on each columnar reader (tests/codecs/conftest.py).
pytestmark = pytest.mark.usefixtures("json_engine")

SCHEMA: dict[str, Any] = {
    **BASE,
    "properties": {
        **BASE["properties"],
        "m": {"type": "object", "additionalProperties": {"type": "number"}},
    },
}
SEEDS = [
    b'{"id": 1, "name": "caf\\u00e9 \\ud83d\\ude00", "amt": -1.5e-3, "ok": true}',
    b'{"id": -7, "ts": "2024-01-01T00:00:00+02:00", "tags": ["a", null, "\\n"], "sub": {"x": 2}}',
    b'{"id": 0, "m": {"a": 1, "b": 2.5, "c": null}, "extra": [{"deep": [1, {"x": "y"}]}]}',
    '{"id": 3, "name": "\u00fcber \u2603 \U0001f600"}'.encode(),
]


def agree(codec: JsonCodec, payloads: list[bytes]) -> None:
    assert_agrees(codec, payloads)  # type: ignore[arg-type]


MAP_OF_INTS: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "integer"}}

_edit = st.one_of(
    st.tuples(st.just("cut"), st.integers(0, 200)),
    st.tuples(st.just("drop"), st.integers(0, 200), st.integers(1, 4)),
    st.tuples(st.just("put"), st.integers(0, 200), st.binary(min_size=1, max_size=3)),
    st.tuples(
        st.just("put"),
        st.integers(0, 200),
        st.sampled_from([b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b"\xc3", b"\x00"]),
    ),
)


def _apply(doc: bytes, edit: tuple[Any, ...]) -> bytes:
    at = edit[1] % (len(doc) + 1)
    if edit[0] == "cut":
        return doc[:at]
    if edit[0] == "drop":
        return doc[:at] + doc[at + edit[2] :]
    insert: bytes = edit[2]
    return doc[:at] + insert + doc[at:]


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(SEEDS), st.lists(_edit, max_size=3)), max_size=8))
def test_damaged_documents_decode_or_fail_like_decode_value(
    cases: list[tuple[bytes, list[tuple[Any, ...]]]],
) -> None:
    payloads = []
    for doc, edits in cases:
        for edit in edits:
            doc = _apply(doc, edit)
        payloads.append(doc)
    agree(JsonCodec(SCHEMA), [*SEEDS, *payloads])


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from([*SCHEMA["properties"], "x", "id"]), _json), max_size=8
    )
)
def test_any_json_object_decodes_or_fails_like_decode_value(docs: list[dict[str, Any]]) -> None:
    payloads = [orjson.dumps(d) for d in docs]
    agree(JsonCodec(SCHEMA), payloads)
    agree(JsonCodec({**SCHEMA, "additionalProperties": False}), payloads)


NUMBERS = [
    b"0", b"-0", b"-0.0", b"0.0", b"1e2", b"1E+2", b"1e-2", b"123456789012345678",
    b"1234567890123456789", b"-9223372036854775808", b"9223372036854775807",
    b"9223372036854775808", b"12345678901234567890123", b"1e400", b"-1e400", b"1e-400",
    b"4.9e-324", b"2.2250738585072014e-308", b"0.1", b"0.30000000000000004",
    b"1.7976931348623157e308", b"9007199254740993", b"00", b"-", b"1.", b".5", b"+1",
    b"1e", b"1e+", b"0x10", b"1_000", b"Infinity", b"-NaN", b"1.0e0000000000000000001",
    b"0." + b"0" * 80 + b"1",
]  # fmt: skip


@pytest.mark.parametrize("field", ["id", "amt"])
def test_numbers_decode_or_fail_like_decode_value(field: str) -> None:
    agree(JsonCodec(SCHEMA), [b'{"id": 1, "%s": %s}' % (field.encode(), n) for n in NUMBERS])


WHITESPACE_AND_STRUCTURE = [
    b'\t\r\n {"id"\n:\r1\t}\n\r ', b'{"id":1,"sub":{}}', b'{"id":1,"sub":{"x":1,}}',
    b'{"id":1,"tags":[]}', b'{"id":1,"tags":[,]}', b'{"id":1,"tags":["a",]}',
    b'{"id":1,"tags":["a" "b"]}', b'{"id":1 "name":"a"}', b'{"id":1,,"name":"a"}',
    b'{"id":1}}', b'{"id":1}]', b'{{"id":1}', b'{"id":1', b'{"id"', b'{', b'{"id":1,"m":{"a":1,"a":2}}',
    b'{"id":1,"m":{"\\u0061":1,"a":2}}', b'{"id":1,"m":{"":1}}', b'{"id":1,"x":' + b"[" * 600 + b"]" * 600 + b"}",
    b'{"id":1,"x":' + b"[" * 5000 + b"]" * 5000 + b"}", b'{"id":1,"sub":{"x":1,"x":1}}',
    b'{"id":1,"sub":{"y":{"z":[1,2,{"q":null}]}}}', b'\xef\xbb\xbf{"id":1}', b'{"id":1}\x00',
    b'{"id":1,"name":"\\x41"}', b'{"id":1,"name":"\\u12"}', b'{"id":1,"name":"\\uDC00"}',
    b'{"id":1,"name":"\\uD800\\u0041"}', b'{"id":1,"name":"\xed\xa0\x80"}', b'{"id":1,"name":"\xc0\xaf"}',
    b'{"id":1,"name":"\xf4\x90\x80\x80"}', b'{"id":1,"name":"\xe2\x82"}', b'{"id":1,"n\xc3\xa4me":"x"}',
    b'{"id":1,"ok":tru}', b'{"id":1,"ok":True}', b'{"id":1,"ok":nul}', b'{"id":1,"name":nullx}',
    b'{"id":1,"_twg_x":1}', b'{"id":1,"sub":{"_twg_x":1}}', b'{"id":1,"m":{"_twg_x":1}}',
]  # fmt: skip


def test_structure_and_text_edge_cases_decode_or_fail_like_decode_value() -> None:
    for strict in (False, True):
        codec = JsonCodec({**SCHEMA, "additionalProperties": not strict})
        agree(codec, WHITESPACE_AND_STRUCTURE)
        for p in WHITESPACE_AND_STRUCTURE:
            agree(codec, [p])


def test_a_null_taken_back_with_its_row_leaves_later_validity_right() -> None:
    # A column's validity is written from its first null on. Here the first null of
    # `name` and `tags` items is in a row set aside after it (`id` is no integer), so it
    # is taken back; 20 valid rows follow, then nulls again.
    payloads = [
        *[b'{"id": %d, "name": "n%d"}' % (i, i) for i in range(10)],
        b'{"name": null, "tags": [null], "id": "not a number"}',
        *[b'{"id": %d, "name": "m%d", "tags": ["t"]}' % (i, i) for i in range(10, 30)],
        b'{"id": 30, "tags": ["u", null]}',
        b'{"id": 31, "name": "last", "tags": null}',
    ]
    agree(JsonCodec(SCHEMA), payloads)
    decoded = JsonCodec(SCHEMA).decode_batch(pa.array(payloads, pa.binary())).batch
    names = decoded.column("name").to_pylist()
    assert names == [*(f"n{i}" for i in range(10)), *(f"m{i}" for i in range(10, 30)), None, "last"]


def test_keys_that_extend_shorten_or_escape_a_field_name_are_other_keys() -> None:
    # The next expected field is matched in place, by its name's bytes and a quote.
    docs = [
        b'{"idx": 5, "id": 1, "name": "a"}',
        b'{"id": 2, "namex": "b", "name": "c", "ok": true}',
        b'{"id": 3, "nam": "d", "name": "e"}',
        b'{"id": 4, "n\\u0061me": "f"}',
        b'{"id": 5, "name": "g", "ok_": 1, "ok": false}',
        b'{"id": 6, "name"  : "h", "amt":1.5}',
        b'{"id": 7, "name',
        b'{"id": 1, "nameX: "v"}',  # one key, `nameX: `, then no colon: malformed
        b'{"id": 8, "namex": "z", "amtt": 2}',
        b'{"idx": 9, "id": 9, "nam": "y"}',
    ]
    for strict in (False, True):
        agree(JsonCodec({**SCHEMA, "additionalProperties": not strict}), docs)
    decoded = JsonCodec(SCHEMA).decode_batch(pa.array(docs[-2:], pa.binary())).batch
    assert decoded.column("id").to_pylist() == [8, 9]
    assert decoded.column("name").to_pylist() == [None, None]
    assert decoded.column("amt").to_pylist() == [None, None]


def test_float32_and_narrow_integers_from_an_arrow_schema() -> None:
    schema = pa.schema(
        [
            pa.field("i8", pa.int8()),
            pa.field("u16", pa.uint16()),
            pa.field("u64", pa.uint64()),
            pa.field("f32", pa.float32()),
        ]
    )
    payloads = [
        b'{"i8": 127, "u16": 65535, "u64": 9223372036854775807, "f32": 0.5}',
        b'{"i8": 128}', b'{"i8": -129}', b'{"u16": -1}', b'{"u16": 65536}',
        b'{"u64": 18446744073709551615}', b'{"u64": -1}', b'{"f32": 1e300}', b'{"f32": 0.1}',
    ]  # fmt: skip
    codec = JsonCodec(schema)
    res = codec.decode_batch(payloads)
    by_row = {e.index: e.message for e in res.errors}
    assert set(by_row) >= {1, 2, 3, 4, 6}
    assert res.batch.schema == codec.arrow_schema
    assert res.batch.to_pylist()[0] == {"i8": 127, "u16": 65535, "u64": 2**63 - 1, "f32": 0.5}
    assert 5 not in by_row  # the largest uint64 fits its column
    assert res.batch.column("u64").to_pylist()[1] == 2**64 - 1


def test_large_batches_of_sample_orders_read_alike_on_every_engine() -> None:
    payloads = [orjson.dumps(o, default=str) for o in sample_orders(3000)]
    payloads[7] = payloads[7].replace(b'"customer_id":', b'"customer_id":"x","_":', 1)
    payloads[11] = payloads[11].replace(b'"status"', b'"\\u0073tatus"', 1)
    res = JsonCodec(ORDER_JSON_SCHEMA).decode_batch(payloads)
    assert [e.index for e in res.errors] == [7]
    assert res.batch.num_rows == 2999
    agree(JsonCodec(ORDER_JSON_SCHEMA), payloads[:40])


def test_engine_is_checked(json_engine: str) -> None:
    with pytest.raises(ConfigError, match="expected engine `auto`, `native` or `pyarrow`"):
        JsonCodec(SCHEMA, engine="fast")  # type: ignore[arg-type]
    if json_engine == "native":  # the codec sees the native reader built and enabled
        JsonCodec(SCHEMA, engine="native")
    else:  # what an installation built without a C compiler says
        with pytest.raises(ConfigError, match="native reader is not built"):
            JsonCodec(SCHEMA, engine="native")
    JsonCodec(SCHEMA, engine="pyarrow")


def test_out_of_range_numbers_in_skipped_fields_fail_like_decode_value() -> None:
    # orjson refuses a number that overflows a double wherever it stands, also in a
    # field outside the schema, at any depth; an in-range one there is no failure.
    skipped = [
        b"1e400", b"-1e400", b"1E+309", b"[1, 1e400]", b'{"y": -2e308}', b"1" + b"0" * 400,
        b"1" + b"0" * 400 + b".5", b"0." + b"0" * 80 + b"1e400", b"1e308", b"-1.5e-400",
        b"1" + b"0" * 30, b"123456789012345678901234567890", b"0." + b"0" * 80 + b"1",
    ]  # fmt: skip
    payloads = [b'{"id": 1, "extra": %s}' % n for n in skipped]
    payloads += [b'{"id": 1, "sub": {"x": 1, "y": %s}}' % n for n in skipped]
    agree(JsonCodec(SCHEMA), payloads)


def test_nulls_under_a_map_against_required_fields_fail_like_decode_value() -> None:
    # A required field or item inside a map's values: a null or a missing value there
    # fails with decode_value's message (and never takes the process down).
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "m": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "required": ["q"],
                    "properties": {
                        "q": {"type": "integer"},
                        "o": {"type": "boolean"},
                        "l": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
            "n": {"type": "object", "additionalProperties": {"type": "number"}},
        },
    }
    payloads = [
        b'{"m": {"a": {}}}', b'{"m": {"a": {"q": 1}, "b": {"o": true}}}', b'{"m": {"a": {"q": null}}}',
        b'{"m": {"a": {"q": 1, "o": null, "l": [null, "x"]}}}', b'{"m": {"a": {"q": 2}}}',
        b'{"m": {"a": null}}', b'{"m": null, "n": {"x": null, "y": 1}}', b'{"n": {"x": 1.5}}',
    ]  # fmt: skip
    agree(JsonCodec(schema), payloads)
    for p in payloads:
        agree(JsonCodec(schema), [p])
    arrow = pa.schema(
        [
            pa.field("m", pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False))),
            pa.field("k", pa.map_(pa.string(), pa.list_(pa.field("i", pa.int64(), nullable=False)))),
        ]
    )  # fmt: skip
    payloads = [
        b'{"m": {"a": null}}', b'{"m": {"a": 1, "b": null}}', b'{"m": {"a": 1}}',
        b'{"k": {"a": [1, null]}}', b'{"k": {"a": null, "b": [2]}}', b'{"k": {"a": [1]}}',
    ]  # fmt: skip
    agree(JsonCodec(arrow), payloads)


def test_nulls_under_a_large_list_against_required_fields_fail_like_decode_value() -> None:
    # The columnar required check does not walk large lists: a null item, or a null
    # required field of a struct item, fails there with decode_value's message.
    item = pa.struct([pa.field("x", pa.int64(), nullable=False), pa.field("y", pa.string())])
    schema = pa.schema(
        [
            pa.field("l", pa.large_list(pa.field("item", pa.int64(), nullable=False))),
            pa.field("s", pa.large_list(item)),
            pa.field("n", pa.large_list(pa.int64())),
        ]
    )
    payloads = [
        b'{"l": [1, null]}', b'{"l": [1]}', b'{"l": null}', b'{"s": [{"x": 1}, {"y": "a"}]}',
        b'{"s": [{"x": null}]}', b'{"s": [null, {"x": 2, "y": null}]}', b'{"n": [1, null]}',
    ]  # fmt: skip
    agree(JsonCodec(schema), payloads)
    for p in payloads:
        agree(JsonCodec(schema), [p])


def test_maps_with_many_keys_decode_like_decode_value_in_linear_time(
    monkeypatch: pytest.MonkeyPatch, json_engine: str
) -> None:
    schema = {"type": "object", "properties": {"m": MAP_OF_INTS}}
    keys = [f"k{i}" for i in range(40)]
    payloads = [
        orjson.dumps({"m": dict.fromkeys(keys, 1)}),
        b'{"m": {%s, "k39": 2}}' % b", ".join(b'"%s": 1' % k.encode() for k in keys),
        b'{"m": {%s, "k0": 2}}' % b", ".join(b'"%s": 1' % k.encode() for k in keys),
        b'{"m": {%s, "\\u006b7": 2}}' % b", ".join(b'"%s": 1' % k.encode() for k in keys),
        b'{"m": {%s, "k7": null}}' % b", ".join(b'"%s": 1' % k.encode() for k in keys),
    ]
    for n in range(14, 20):  # around the size where the reader changes method
        for dup in (0, n // 2, n - 1):
            entries = [*(f'"k{i}": {i}' for i in range(n)), f'"k{dup}": -1']
            payloads.append(b'{"m": {%s}}' % ", ".join(entries).encode())
    agree(JsonCodec(schema), payloads)
    # Many keys: not compared pairwise. The work is counted, not timed (the timing is
    # benchmarks/json_map_keys.py): the map of distinct keys is read by the native reader
    # in one pass, and only the map that repeats a key goes the per-value way.
    big = orjson.dumps({"m": {f"key{i:07d}": i for i in range(200_000)}})
    set_aside: list[list[int]] = []
    real = JsonCodec._set_aside

    def counted(self: JsonCodec, rows: Any, bodies: Any, where: Any) -> Any:
        set_aside.append([int(j) for j in where])
        return real(self, rows, bodies, where)

    monkeypatch.setattr(JsonCodec, "_set_aside", counted)
    res = JsonCodec(schema).decode_batch([big, big[:-2] + b', "key0199999": 0}}'])
    maps = res.batch.column("m")  # entries counted from the offsets, not 400,000 tuples
    assert maps.null_count == 0 and np.diff(maps.offsets.to_numpy()).tolist() == [200_000] * 2
    # The pyarrow reader has no map columns: it decodes every map per value.
    assert set_aside == ([[1]] if json_engine == "native" else [])


@pytest.mark.skipif(not NATIVE, reason="the native reader is not built")
def test_a_decoder_without_a_plan_refuses_to_decode() -> None:
    from thalweg_bytewax.codecs import _json_native

    decoder = _json_native.Decoder.__new__(_json_native.Decoder)
    with pytest.raises(ValueError, match="no plan"):
        decoder.decode(b"{}", np.array([0, 2], np.int32))


_ITEM = pa.struct([pa.field("x", pa.int8(), nullable=False), pa.field("s", pa.string())])
NESTED = pa.schema(
    [
        pa.field("i8", pa.int8()),
        pa.field("u64", pa.uint64()),
        pa.field("b", pa.bool_(), nullable=False),
        pa.field("lb", pa.list_(pa.bool_())),
        pa.field("ll", pa.large_list(pa.list_(pa.field("i", pa.int16(), nullable=False)))),
        pa.field("ls", pa.list_(_ITEM)),
        pa.field("mm", pa.map_(pa.string(), pa.map_(pa.string(), pa.bool_()))),
        pa.field("ms", pa.map_(pa.string(), _ITEM)),
    ]
)
_nested_value = st.recursive(
    st.none()
    | st.booleans()
    | st.sampled_from([0, -1, 127, 128, -129, 2**63 - 1, 2**63, 2**64 - 1, 0.5])
    | st.sampled_from(["", "x", "\u00e9", "\U0001f600"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["x", "s", "i", "a", "b"]), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from([*NESTED.names, "z"]), _nested_value), max_size=10))
def test_nested_arrow_columns_decode_or_fail_like_decode_value(docs: list[dict[str, Any]]) -> None:
    agree(JsonCodec(NESTED), [orjson.dumps(d) for d in docs])


def test_float32_overflow_is_a_mismatch_never_an_infinity() -> None:
    schema = pa.schema([pa.field("f", pa.float32()), pa.field("h", pa.float16())])
    payloads = [
        b'{"f": 1e39}', b'{"f": -1e39}', b'{"f": 3.4028235e38}', b'{"f": 1.5}',
        b'{"h": 70000}', b'{"h": 65504}', b'{"f": 1e-50}',
    ]  # fmt: skip
    codec = JsonCodec(schema)
    agree(codec, payloads)
    res = codec.decode_batch(payloads)
    assert [e.index for e in res.errors] == [0, 1, 4]
    assert "within float32 range" in res.errors[0].message
    assert "within float16 range" in res.errors[2].message


def test_required_nulls_in_maps_and_large_lists_are_found_by_the_columnar_check() -> None:
    schema = pa.schema(
        [
            pa.field("m", pa.map_(pa.string(), pa.field("v", pa.int64(), nullable=False))),
            pa.field("l", pa.large_list(pa.field("i", pa.string(), nullable=False))),
        ]
    )
    payloads = [
        b'{"m": {"a": 1, "b": null}}', b'{"m": {"a": 1}}', b'{"l": ["x", null]}', b'{"l": ["x"]}',
        b'{"m": null, "l": null}', b'{"m": {}, "l": []}',
    ]  # fmt: skip
    codec = JsonCodec(schema)
    agree(codec, payloads)
    res = codec.decode_batch(payloads)
    assert [e.index for e in res.errors] == [0, 2]
    assert res.batch.schema == codec.arrow_schema


def test_an_arrow_schema_with_a_repeated_field_name_is_refused() -> None:
    with pytest.raises(SchemaError, match="field `a` appears twice in the schema"):
        JsonCodec(pa.schema([pa.field("a", pa.int64()), pa.field("a", pa.string())]))
    nested = pa.struct([pa.field("x", pa.int64()), pa.field("x", pa.int64())])
    with pytest.raises(SchemaError, match="field `x` appears twice in `s`"):
        JsonCodec(pa.schema([pa.field("s", pa.list_(nested))]))


def test_null_fields_and_types_without_a_json_form() -> None:
    codec = JsonCodec(pa.schema([pa.field("id", pa.int64()), pa.field("n", pa.null())]))
    agree(codec, [b'{"id": 1, "n": null}', b'{"id": 2}', b'{"id": 3, "n": 0}'])
    res = codec.decode_batch([b'{"id": 3, "n": 0}'])
    assert res.errors[0].message == "json field `n`: expected null; got 0"
    with pytest.raises(SchemaError, match="no JSON conversion for Arrow type binary at `b`"):
        JsonCodec(pa.schema([pa.field("b", pa.binary())]))


def test_the_pyarrow_fallback_is_logged_once(
    json_engine: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import thalweg_bytewax._deps as deps

    monkeypatch.setattr(deps, "_LOGGED", set())
    with caplog.at_level("WARNING", logger="thalweg_bytewax.codecs.json"):
        JsonCodec(SCHEMA)
        JsonCodec(SCHEMA)
    warned = [r for r in caplog.records if "native reader is not built" in r.getMessage()]
    assert len(warned) == (0 if json_engine == "native" else 1)
