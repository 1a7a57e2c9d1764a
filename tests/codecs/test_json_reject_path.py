"""The JSON codec's reject path: what a bad row becomes, and that it stays cheap.

A flood of bad records (a broken upstream deploy) must not stall a flow. These tests
pin what each kind of bad row turns into (kind, message, the DLQ row with its raw bytes
and locator) on every columnar reader, and that a malformed document is rejected by
the native reader itself rather than by a second, per-row parse in Python.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import thalweg_bytewax.codecs.json as json_module
import thalweg_bytewax.operators as twg
from tests.codecs.json_agreement import assert_agrees
from tests.helpers import locator_of, raw_values, run_flow
from thalweg_bytewax.codecs.base import FailureKind
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.codecs.json import JsonCodec
from thalweg_bytewax.dev.samples import ORDER_JSON_SCHEMA, sample_orders
from thalweg_bytewax.lanes.dlq import rejected_from_dlq_batch

PLAIN: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "amount": {"type": "number"},
        "active": {"type": "boolean"},
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "name"],
}


def _plain(i: int) -> bytes:
    doc = {"id": i, "amount": i / 4, "active": i % 2 == 0, "name": f"n-é-{i}", "tags": ["a"]}
    return orjson.dumps(doc)


def _orders(n: int) -> list[bytes]:
    return [orjson.dumps(o, default=str) for o in sample_orders(n)]


def _garbage(good: list[bytes], seed: int = 5) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(len(p)) for p in good]


def _truncations(doc: bytes) -> list[bytes]:
    return [doc[:k] for k in range(len(doc))]


# Exact texts: what decode_value says, and so what a DLQ row carries.
PINNED: list[tuple[bytes, str]] = [
    (b'{"id": 1, "na', "unexpected end of data: line 1 column 14 (char 13)"),
    (b'{\n "id": 1,\n "name": "\xc3\xa9', "unexpected end of data: line 3 column 12 (char 23)"),
    (b"", "Input is a zero-length, empty document: line 1 column 1 (char 0)"),
    (b"  \n", "input data is empty: line 1 column 1 (char 0)"),
    (b"x{}", "unexpected character, expected a JSON value: line 1 column 1 (char 0)"),
    (b'{"id": 1, "name": "a"} x', "unexpected content after document: line 1 column 24 (char 23)"),
    (b'{"id": 1, "name": "\xff"}', "str is not valid UTF-8: surrogates not allowed: line 1 column 1 (char 0)"),  # noqa: E501
    (b"\x8f\x00\x13", "str is not valid UTF-8: surrogates not allowed: line 1 column 1 (char 0)"),
    (b'{"id": -', "unexpected end of data: line 1 column 9 (char 8)"),
    (b'{"id": 1, "name": "a\\u00', "unexpected end of data: line 1 column 25 (char 24)"),
]


@pytest.mark.usefixtures("json_engine")
@pytest.mark.parametrize(("body", "text"), PINNED, ids=range(len(PINNED)))
def test_a_malformed_document_keeps_its_kind_and_text(body: bytes, text: str) -> None:
    codec = JsonCodec(PLAIN)
    res = assert_agrees(codec, [_plain(0), body, _plain(2)])
    (failure,) = res.errors
    assert (failure.index, failure.kind) == (1, FailureKind.MALFORMED)
    assert failure.message == f"json payload is malformed: {text}"


@pytest.mark.usefixtures("json_engine")
@pytest.mark.parametrize("shape", ["plain", "order"])
def test_every_truncation_and_garbage_fails_like_decode_value(shape: str) -> None:
    if shape == "plain":
        codec, good = JsonCodec(PLAIN), [_plain(i) for i in range(40)]
    else:
        codec, good = JsonCodec(ORDER_JSON_SCHEMA), _orders(40)
    bad: list[bytes | None] = [*_truncations(good[0]), *_truncations(good[1]), *_garbage(good)]
    res = assert_agrees(codec, bad)
    assert len(res.errors) == len(bad)
    assert {e.kind for e in res.errors} <= {FailureKind.MALFORMED, FailureKind.SCHEMA_MISMATCH}
    # A cut document is malformed whatever the cut (a prefix that is itself a complete
    # JSON value is no document of a truncated record's shape here).
    cut = res.errors[: len(good[0]) + len(good[1])]
    assert all(e.kind is FailureKind.MALFORMED for e in cut)


@pytest.mark.usefixtures("json_engine")
@pytest.mark.parametrize("share", [0.01, 0.1, 0.5])
def test_good_rows_of_a_mixed_batch_decode_exactly(share: float) -> None:
    rng = random.Random(int(share * 100))
    good = _orders(300)
    codec = JsonCodec(ORDER_JSON_SCHEMA)
    clean = codec.decode_batch(pa.array(good, pa.binary())).batch
    mixed: list[bytes | None] = []
    kept: list[int] = []
    for i, p in enumerate(good):
        if rng.random() < share:
            mixed.append(p[: rng.randint(0, len(p) - 1)] if rng.random() < 0.5 else rng.randbytes(9))
        else:
            mixed.append(p)
            kept.append(i)
    res = assert_agrees(codec, mixed)
    assert res.batch.equals(clean.take(pa.array(kept, pa.int64())))
    assert [e.index for e in res.errors] == [i for i in range(len(mixed)) if i not in kept]


@pytest.mark.usefixtures("json_engine")
def test_confluent_framed_malformed_bodies_fail_like_decode_value() -> None:
    codec = JsonCodec(PLAIN, framing="confluent")
    good = [encode_confluent(3, _plain(i)) for i in range(5)]
    cut = [encode_confluent(3, b[:9]) for b in _truncations(_plain(7))]
    bad: list[bytes | None] = [*cut, good[0][:3], b"\x01" + good[1][1:]]
    res = assert_agrees(codec, [*good, *bad])
    assert res.batch.num_rows == len(good) and len(res.errors) == len(bad)


def test_bad_rows_reach_the_dlq_with_their_bytes_locator_and_text() -> None:
    good = [_plain(i) for i in range(6)]
    values = [good[0], good[1][:10], b"\xfe\xff", good[3], b"", good[5] + b" ]"]
    batch = raw_values(values, partition=2, first=50)
    out = run_flow(
        [("orders:2", batch)],
        lambda up: twg.decode("decode", up, JsonCodec(PLAIN)),
        flow_id="json_reject",
    )
    ok, rejected = out["ok"], out["rejected"]
    assert [b.num_rows for _, b in ok] == [2]
    got = {locator_of(r).offset: r for r in rejected_from_dlq_batch(rejected[0][1])}
    assert sorted(got) == [51, 52, 54, 55]
    chars = len(good[5].decode())  # a character position, not a byte one
    texts = {
        51: "unexpected end of data: line 1 column 11 (char 10)",
        52: "str is not valid UTF-8: surrogates not allowed: line 1 column 1 (char 0)",
        54: "Input is a zero-length, empty document: line 1 column 1 (char 0)",
        55: f"unexpected content after document: line 1 column {chars + 2} (char {chars + 1})",
    }
    for offset, r in got.items():
        assert r.reason == "decode" and r.raw_value == values[offset - 50]
        assert r.raw_key == f"k{offset - 50}".encode()
        assert locator_of(r).topic == "orders" and locator_of(r).partition == 2
        assert r.message == (
            f"json decode failed at `orders:2@{offset}` (malformed): "
            f"json payload is malformed: {texts[offset]}"
        )


class _CountingOrjson:
    """``orjson`` as the codec module sees it, counting ``loads`` calls."""

    def __init__(self) -> None:
        self.loads_calls = 0
        self.JSONDecodeError = orjson.JSONDecodeError
        self.dumps = orjson.dumps

    def loads(self, body: bytes | str) -> Any:
        self.loads_calls += 1
        return orjson.loads(body)


@pytest.mark.parametrize("shape", ["plain", "order"])
def test_the_native_reader_rejects_malformed_documents_without_a_second_parse(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A truncated or garbled document costs one native parse, not a per-row parse too."""
    if shape == "plain":
        codec, good = JsonCodec(PLAIN, engine="native"), [_plain(i) for i in range(200)]
    else:
        codec, good = JsonCodec(ORDER_JSON_SCHEMA, engine="native"), _orders(200)
    rng = random.Random(1)
    bad = [p[: rng.randint(1, len(p) - 1)] for p in good] + _garbage(good)
    spy = _CountingOrjson()
    monkeypatch.setattr(json_module, "orjson", spy)
    res = codec.decode_batch(pa.array(bad, pa.binary()))
    assert len(res.errors) == len(bad)
    assert all(e.kind is FailureKind.MALFORMED for e in res.errors)
    # Only rows the reader sets aside for a reason other than syntax (a garbage body
    # that starts like a JSON value other than an object) may take the per-row path.
    assert spy.loads_calls <= len(bad) // 20


_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
_doc = st.fixed_dictionaries(
    {"id": st.integers(-(2**40), 2**40), "name": _text},
    optional={"amount": st.floats(allow_nan=False, allow_infinity=False), "z": _text},
)


@pytest.mark.usefixtures("json_engine")
@given(
    docs=st.lists(
        st.tuples(
            _doc,
            st.sampled_from(["cut", "junk", "garbage", "pretty", "keep"]),
            st.integers(0, 500),
            st.binary(max_size=5),
        ),
        max_size=10,
    )
)
def test_any_cut_junk_or_garbage_fails_exactly_like_decode_value(
    docs: list[tuple[dict[str, Any], str, int, bytes]],
) -> None:
    codec = JsonCodec(PLAIN)
    payloads: list[bytes | None] = []
    for doc, how, at, extra in docs:
        body = orjson.dumps(doc, option=orjson.OPT_INDENT_2 if how == "pretty" else 0)
        if how in ("cut", "pretty"):
            body = body[: at % (len(body) + 1)]
        elif how == "junk":
            body = body + b" \n"[: at % 3] + extra
        elif how == "garbage":
            body = extra + body[: at % 7]
        payloads.append(body)
    assert_agrees(codec, payloads)


@pytest.mark.parametrize("payload", [b".", b".5", b"+1", b" +", b"-x", b"e"])
def test_a_document_starting_like_no_json_value_fails_as_orjson_says(payload: bytes) -> None:
    # orjson reads '.' and '+' as the start of a number ("no digit after sign"), other
    # characters as no value at all: the batch path must word each the same way.
    codec = JsonCodec(pa.schema([("id", pa.int64()), ("name", pa.string())]))
    assert_agrees(codec, [payload])
