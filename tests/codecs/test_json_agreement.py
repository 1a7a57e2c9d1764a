"""JsonCodec: the columnar reader never accepts what the per-value path refuses.

``decode_batch`` reads most rows with ``pyarrow.json``, which is laxer than ``orjson``
in places (NaN literals, invalid UTF-8, non-object documents, escaped keys); the rows
where the two could differ must reach the exact path and fail there, with the message
``decode_value`` gives.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tests.codecs.json_agreement import SCHEMA, WITH_MAP, assert_agrees, decode
from thalweg_bytewax.codecs import FailureKind
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.codecs.json import JsonCodec, JsonDecodeError
from thalweg_bytewax.errors import ThalwegError

# Every test runs on each columnar reader (tests/codecs/conftest.py).
pytestmark = pytest.mark.usefixtures("json_engine")

BOTH = pytest.mark.parametrize("schema", [SCHEMA, WITH_MAP], ids=["columnar", "with_map"])
GOOD = b'{"id": 1, "name": "a"}'


# ---------------------------------------------------------------- non-object documents
NOT_OBJECTS = [b"null", b"[1]", b"5", b'"x"', b"true", b"[]", b" null ", b"null\n", b"-0.5"]


@BOTH
@pytest.mark.parametrize("doc", NOT_OBJECTS)
def test_a_non_object_document_alone_is_a_schema_mismatch(
    schema: dict[str, Any], doc: bytes
) -> None:
    # `null` alone used to crash the process inside pyarrow.json.
    c = JsonCodec(schema)
    res = assert_agrees(c, [doc])
    assert res.batch.num_rows == 0
    (err,) = res.errors
    assert err.kind is FailureKind.SCHEMA_MISMATCH
    assert err.message.startswith("json field `$`: expected an object; got "), err.message


@pytest.mark.parametrize(
    "schema",
    [SCHEMA, {**SCHEMA, "required": []}, WITH_MAP],
    ids=["columnar", "nothing_required", "with_map"],
)
def test_non_object_documents_among_good_rows_never_become_null_rows(
    schema: dict[str, Any],
) -> None:
    # Without a required field, a `null` document used to read as an all-NULL row.
    c = JsonCodec(schema)
    payloads: list[bytes | None] = [GOOD]
    for doc in NOT_OBJECTS:
        payloads += [doc, b'{"id": 2}']
    res = assert_agrees(c, payloads)
    assert [e.index for e in res.errors] == list(range(1, 2 * len(NOT_OBJECTS), 2))
    assert {e.kind for e in res.errors} == {FailureKind.SCHEMA_MISMATCH}
    assert [r["id"] for r in res.batch.to_pylist()] == [1] + [2] * len(NOT_OBJECTS)
    assert "expected an object; got None" in res.errors[0].message


def test_null_document_with_a_required_nested_field_and_confluent_framing() -> None:
    schema = {**SCHEMA, "properties": {**SCHEMA["properties"]}, "required": ["id", "sub"]}
    c = JsonCodec(schema, framing="confluent")
    res = decode(c, [encode_confluent(1, b"null")])
    assert res.batch.num_rows == 0
    assert [(e.kind, e.message) for e in res.errors] == [
        (FailureKind.SCHEMA_MISMATCH, "json field `$`: expected an object; got None")
    ]
    res = decode(c, [encode_confluent(1, b'{"id": 1, "sub": {}}'), encode_confluent(1, b"null")])
    assert res.batch.num_rows == 1 and [e.index for e in res.errors] == [1]


def test_inferred_schema_skips_non_object_documents() -> None:
    c = JsonCodec("infer")
    res = decode(c, [b"null", b'{"a": 1}', b"[2]"])
    assert res.batch.to_pylist() == [{"a": 1}]
    assert [(e.index, e.kind) for e in res.errors] == [
        (0, FailureKind.SCHEMA_MISMATCH),
        (2, FailureKind.SCHEMA_MISMATCH),
    ]


@pytest.mark.parametrize("doc", NOT_OBJECTS)
def test_inferred_schema_decode_value_refuses_a_non_object_first(doc: bytes) -> None:
    # `null` used to crash the process here too (inference read it with pyarrow.json).
    c = JsonCodec("infer")
    with pytest.raises(
        JsonDecodeError, match=r"^json field `\$`: expected an object; got "
    ) as info:
        c.decode_value(doc)
    assert info.value.kind is FailureKind.SCHEMA_MISMATCH
    assert c.decode_value(b'{"a": 1}') == {"a": 1} and c.arrow_schema.names == ["a"]


def test_inferred_schema_from_a_first_value_or_a_set_aside_row() -> None:
    # Both used to fail on a missing attribute before the shape was known.
    assert JsonCodec("infer").decode_value(b'{"a": 1}') == {"a": 1}
    res = decode(JsonCodec("infer"), [b'{\n "a": 1\n}', b'{"a": 2}'])
    assert res.errors == [] and res.batch.to_pylist() == [{"a": 1}, {"a": 2}]


def test_inferred_schema_ignores_rows_that_fail() -> None:
    c = JsonCodec("infer")
    res = decode(c, [b'{"a":1}null{"b":2}', b'{"a": 3, "c": NaN}', b'{"a": 4}'])
    assert c.arrow_schema.names == ["a"]
    assert res.batch.to_pylist() == [{"a": 4}] and [e.index for e in res.errors] == [0, 1]


def test_only_braced_rows_reach_the_columnar_reader() -> None:
    # A guard, not a path: a bug that let another row through must be loud, not a crash.
    c = JsonCodec(SCHEMA)
    for rows in ([b"null"], [GOOD, b"5"], [GOOD, b""], [b" " + GOOD]):
        with pytest.raises(ThalwegError, match="a codec bug"):
            c._read(pa.array(rows, pa.binary()))


# ---------------------------------------------------------------- invalid UTF-8
BAD_UTF8 = [
    b'{"id": 2, "name": "\xff\xfe"}',  # invalid bytes in a schema string
    b'{"id": 2, "extra": "a\xc3"}',  # a truncated sequence in a field outside the schema
    b'{"id": 2, "name": "\xed\xa0\x80"}',  # an encoded surrogate
    b'{"id": 2, "name": "\xc0\x80"}',  # an overlong NUL
    b'{"id": 2, "tags": ["\xf4\x90\x80\x80"]}',  # beyond U+10FFFF
    b'{"id": 2, "\xff": 1}',  # in a key
]


@BOTH
def test_invalid_utf8_fails_like_decode_value(schema: dict[str, Any]) -> None:
    c = JsonCodec(schema)
    payloads: list[bytes | None] = [
        b'{"id": 1, "name": "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"}'
    ]
    for p in BAD_UTF8:
        payloads += [p, GOOD]
    res = assert_agrees(c, payloads)
    assert [e.index for e in res.errors] == list(range(1, 2 * len(BAD_UTF8), 2))
    assert {e.kind for e in res.errors} == {FailureKind.MALFORMED}
    assert all("not valid UTF-8" in e.message for e in res.errors), res.errors
    assert res.batch.column("name").to_pylist()[0] == "café € 😀"


def test_invalid_utf8_alone_and_confluent_framed() -> None:
    c = JsonCodec(SCHEMA, framing="confluent")
    res = decode(c, [encode_confluent(1, BAD_UTF8[0]), encode_confluent(1, GOOD)])
    assert [(e.index, e.kind) for e in res.errors] == [(0, FailureKind.MALFORMED)]
    # Framing bytes are not JSON: a schema id holding 0xff is no UTF-8 error.
    res = decode(c, [b"\x00\xff\xff\xff\xff" + GOOD])
    assert res.errors == [] and res.batch.num_rows == 1


# ---------------------------------------------------------------- NaN and infinities
NON_FINITE = [
    b'{"id": 1, "amt": NaN}',
    b'{"id": 1, "amt": -NaN}',
    b'{"id": 1, "amt": Infinity}',
    b'{"id": 1, "amt":-Infinity}',
    b'{"id": 1, "amt": Inf}',
    b'{"id": 1, "amt":\t-Inf}',
    b'{"id": 1, "sub": {"f": NaN}}',
    b'{"id": 1, "other": [1, NaN]}',  # outside the schema: still not JSON
    b'{"id": 1, "other": {"deep": [Infinity]}}',
    b'{"id": 1,"other":NaN}',
]


@BOTH
def test_nan_and_infinity_literals_are_malformed_on_both_paths(schema: dict[str, Any]) -> None:
    c = JsonCodec(schema)
    payloads: list[bytes | None] = []
    for p in NON_FINITE:
        payloads += [GOOD, p]
    res = assert_agrees(c, payloads)
    assert [e.index for e in res.errors] == list(range(1, 2 * len(NON_FINITE), 2))
    assert {e.kind for e in res.errors} == {FailureKind.MALFORMED}
    for p in NON_FINITE:
        assert decode(c, [p]).batch.num_rows == 0


@BOTH
def test_nan_and_infinity_inside_strings_decode(schema: dict[str, Any]) -> None:
    c = JsonCodec(schema)
    texts = ["NaN", "Infinity", "-Inf", "Information", "a, NaN", "x: Inf", "[NaN]", "BaNaNa"]
    payloads: list[bytes | None] = [
        b'{"id": %d, "name": "%s", "tags": ["%s"]}' % (i, t.encode(), t.encode())
        for i, t in enumerate(texts)
    ]
    payloads.append(b'{"id": 9, "NaN": 1, "Infinity": "Inf"}')
    res = assert_agrees(c, payloads)
    assert res.errors == []
    assert res.batch.column("name").to_pylist()[: len(texts)] == texts


# ---------------------------------------------------------------- escaped keys
ESCAPED_RESERVED = [
    b'{"id": 1, "\\u005ftwg_x": 1}',
    b'{"id": 1, "\\u005Ftwg_x": 1}',
    b'{"id": 1, "_\\u0074wg_x": 1}',
    b'{"id": 1, "_tw\\u0067_x": 1}',
    b'{"id": 1, "\\u005f\\u0074\\u0077\\u0067\\u005f": 1}',
]


@BOTH
def test_an_escaped_reserved_key_is_refused_on_both_paths(schema: dict[str, Any]) -> None:
    c = JsonCodec(schema)
    payloads: list[bytes | None] = []
    for p in ESCAPED_RESERVED:
        payloads += [GOOD, p]
    res = assert_agrees(c, payloads)
    assert [e.index for e in res.errors] == list(range(1, 2 * len(ESCAPED_RESERVED), 2))
    assert {e.kind for e in res.errors} == {FailureKind.RESERVED_FIELD}
    for p in ESCAPED_RESERVED:
        assert decode(c, [p]).errors[0].kind is FailureKind.RESERVED_FIELD


def test_escaped_reserved_key_under_another_prefix() -> None:
    c = JsonCodec(SCHEMA, metadata_prefix="m\u00e9ta/")
    payloads: list[bytes | None] = [
        b'{"id": 1, "m\\u00e9ta/x": 1}',
        b'{"id": 1, "m\\u00C9ta/x": 1}',  # another key: decodes
        b'{"id": 1, "m\xc3\xa9ta\\/x": 1}',  # `\/` is `/`
        b'{"id": 1, "_twg_x": 1}',
    ]
    res = assert_agrees(c, payloads)
    assert [(e.index, e.kind) for e in res.errors] == [
        (0, FailureKind.RESERVED_FIELD),
        (2, FailureKind.RESERVED_FIELD),
    ]


@BOTH
def test_escapes_elsewhere_decode_alike(schema: dict[str, Any]) -> None:
    c = JsonCodec(schema)
    payloads: list[bytes | None] = [
        b'{"\\u0069d": 1}',
        b'{"id": 2, "name": "caf\\u00e9 \\ud83d\\ude00 \\u005f \\"q\\" \\\\u005f"}',
        b'{"id": 3, "tags": ["\\u0000", "\\/"]}',
        b'{"id": 4, "name": "\\ud800"}',  # a lone surrogate: malformed on both paths
    ]
    res = assert_agrees(c, payloads)
    assert [e.index for e in res.errors] == [3]
    assert res.batch.column("name").to_pylist()[1] == 'café 😀 _ "q" \\u005f'


# ---------------------------------------------------------------- the whole zoo
ZOO = [
    b'{"id": 1}', b'{"id": 1.0}', b'{"id": 1.5}', b'{"id": "1"}', b'{"id": true}',
    b'{"id": 9223372036854775808}', b'{"id": 1, "id": 2}', b'{"id": 1, "name": 5}',
    b'{"id": 1, "name": {"a": 1}}', b'{"id": 1, "name": [1]}', b'{"id": 1, "amt": "3"}',
    b'{"id": 1, "amt": 1e400}', b'{"id": 1, "ok": 1}', b'{"id": 1, "ok": "true"}',
    b'{"id": 1, "ts": "2024-01-01T00:00:00Z"}', b'{"id": 1, "ts": "2024-01-01T00:00:00+02:00"}',
    b'{"id": 1, "ts": "2024-01-01"}', b'{"id": 1, "ts": "garbage"}', b'{"id": 1, "ts": 1700000000}',
    b'{"id": 1, "tags": "a"}', b'{"id": 1, "tags": [1, 2]}', b'{"id": 1, "tags": [null]}',
    b'{"id": 1, "sub": 5}', b'{"id": 1, "sub": {"x": "y"}}', b'{"id": 1, "sub": {"x": 1, "x": "a"}}',
    b'{"id": null}', b"{}", b"[1]", b"5", b'"s"', b"", b"  ", b'{"id":1}{"id":2}',
    b'{"id": 1, "\\u005ftwg_x": 1}', b'{"id": 1, "_twg_x": 1}', b'{"id": 1, "name": "a\\u0000b"}',
    b'{"id": 1} ', b' {"id": 1}', b'{"id": 1, "amt": NaN}', b"null",
    b'{"id": 1, "name": null, "name": "x"}', b'{"id": 1, "ID": 2}', b'{"id": -0}', b'{"id": 1E2}',
    b'{"id": 1, "amt": 12345678901234567890}', b'{"id": 1, "sub": null}', b'{"id": 1, "tags": null}',
    b'{"id": 1, "name": "\xff"}', b'{"id": 1,}', b'{"id": 01}', b'{"id": 1, "amt": .5}',
    b'{"id": 1, "amt": 1.}', b'{"id": 1, "amt": +1}', b"{'id': 1}", b'{"id": 1}\x00',
    b'{"id": 1, "name": "a\tb"}', b'{"id":\x0c1}', b'{"id": 1, "x": nan}', b'{"id": 1} // c',
    None,
]  # fmt: skip


@BOTH
def test_every_row_of_the_zoo_decodes_alike_on_both_paths(schema: dict[str, Any]) -> None:
    c = JsonCodec(schema)
    assert_agrees(c, ZOO)
    for p in ZOO:
        assert_agrees(c, [p])
