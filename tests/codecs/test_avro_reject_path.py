"""The Avro codec's reject path: what a bad row becomes, and that it stays cheap.

A flood of bad records (a broken upstream deploy) must not stall a flow. These tests
pin what each kind of bad row turns into (kind and message, as ``decode_value`` says;
the DLQ row with its raw bytes and locator), that the good rows of a mixed batch decode
exactly, and that a body whose structure alone proves it bad (cut short, or with bytes
left over) is rejected without a per-row fastavro read.
"""

from __future__ import annotations

import io
import json
import random
import uuid
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema
from hypothesis import given
from hypothesis import strategies as st

import thalweg_bytewax.operators as twg
from tests.helpers import locator_of, raw_values, run_flow
from thalweg_bytewax.codecs.avro import AvroCodec, AvroDecodeError, AvroEngine
from thalweg_bytewax.codecs.base import DecodeResult, FailureKind
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.dev.samples import ORDER_AVRO_SCHEMA, sample_orders
from thalweg_bytewax.lanes.dlq import rejected_from_dlq_batch
from thalweg_bytewax.registry import registry_client

PLAIN: dict[str, Any] = {
    "type": "record",
    "name": "Plain",
    "namespace": "thalweg.test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "account", "type": "int"},
        {"name": "amount", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "active", "type": "boolean"},
        {"name": "name", "type": "string"},
        {"name": "blob", "type": "bytes"},
        {"name": "code", "type": {"type": "enum", "name": "Code", "symbols": ["A", "B", "C"]}},
        {"name": "note", "type": ["null", "string"]},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "key", "type": {"type": "fixed", "name": "Key", "size": 4}},
    ],
}


def _plain_record(i: int) -> dict[str, Any]:
    return {
        "id": i * 7919 - 50_000,
        "account": i,
        "amount": i / 3,
        "ratio": 0.5,
        "active": i % 2 == 0,
        "name": f"név-{i}" if i % 10 == 0 else f"name-{i}",
        "blob": bytes([i % 256]) * (i % 5),
        "code": "ABC"[i % 3],
        "note": None if i % 3 else f"note {i}",
        "tags": [f"t{j}" for j in range(i % 4)],
        "key": (i % 1000).to_bytes(4, "big"),
    }


def _body(schema: dict[str, Any], rec: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), rec)
    return buf.getvalue()


def _codec(shape: str, *, engine: AvroEngine = "auto") -> tuple[AvroCodec, list[bytes]]:
    url = f"mock://avro-reject-{uuid.uuid4()}"
    schema = PLAIN if shape == "plain" else ORDER_AVRO_SCHEMA
    sid = registry_client(url).register_schema(f"{shape}-value", Schema(json.dumps(schema)))
    if shape == "plain":
        bodies = [_body(PLAIN, _plain_record(i)) for i in range(60)]
    else:
        from thalweg_bytewax.dev.samples import encode_order_avro

        bodies = [encode_order_avro(o, schema_id=sid)[5:] for o in sample_orders(60)]
    return AvroCodec(url, engine=engine), [encode_confluent(sid, b) for b in bodies]


def _cut(payload: bytes) -> list[bytes]:
    """Every truncation of ``payload`` that keeps its 5-byte frame."""
    return [payload[:k] for k in range(5, len(payload))]


def _garbage(good: list[bytes], seed: int = 9) -> list[bytes]:
    rng = random.Random(seed)
    return [p[:5] + rng.randbytes(len(p) - 5) for p in good]


_TAG_TEXT = "invalid union branch index; the body does not match the writer schema"


def assert_agrees(codec: AvroCodec, payloads: list[bytes]) -> DecodeResult:
    """Each failure of ``decode_batch`` is what ``decode_value`` raises for its payload."""
    res = codec.decode_batch(pa.array(payloads, pa.binary()))
    res.batch.validate(full=True)
    failed = {e.index: e for e in res.errors}
    assert len(failed) == len(res.errors)
    for i, p in enumerate(payloads):
        try:
            codec.decode_value(p)
        except AvroDecodeError as exc:
            assert i in failed, (i, p, str(exc))
            assert (failed[i].kind, failed[i].message) == (exc.kind, str(exc)), p
        else:
            # The one known difference: fastavro reads any non-zero boolean byte (and
            # a union branch byte polars reads) leniently; the batch path refuses it.
            assert i not in failed or failed[i].message.endswith(_TAG_TEXT), (i, p, failed[i])
    assert res.batch.num_rows + len(res.errors) == len(payloads)
    return res


@pytest.mark.parametrize("engine", ["polars", "fastavro"])
@pytest.mark.parametrize("shape", ["plain", "order"])
def test_every_truncation_garbage_and_leftover_fails_like_decode_value(
    shape: str, engine: AvroEngine
) -> None:
    codec, good = _codec(shape, engine=engine)
    leftover = [p + b"\x00" * (1 + i % 3) for i, p in enumerate(good[:10])]
    bad = _cut(good[0]) + _cut(good[1]) + _cut(good[5]) + _garbage(good) + leftover
    res = assert_agrees(codec, bad)
    kinds = {e.kind for e in res.errors}
    assert kinds <= {FailureKind.MALFORMED}, kinds
    cut = len(_cut(good[0]) + _cut(good[1]) + _cut(good[5]))
    # Every cut is named a truncation, inside a varint (fastavro's IndexError) as well.
    assert all(e.message.endswith("bytes end inside a record") for e in res.errors[:cut])
    assert all("left over" in e.message for e in res.errors[-len(leftover) :])


def test_pinned_texts_of_each_bad_kind() -> None:
    codec, good = _codec("plain")
    p = good[4]
    sid = int.from_bytes(p[1:5], "big")
    bad_utf8 = encode_confluent(sid, b"\x02\x02" + b"\x00" * 12 + b"\x00\x04\xff\xfe")
    payloads = [p[:9], p + b"\x00\x00", bad_utf8]
    res = assert_agrees(codec, payloads)
    texts = [e.message for e in res.errors]
    assert texts == [
        f"avro schema id {sid}: body truncated, 4 bytes end inside a record",
        f"avro schema id {sid}: 2 bytes left over after the record (read {len(p) - 5} of "
        f"{len(p) - 3}); the body does not match the writer schema",
        f"avro schema id {sid}: invalid UTF-8 in a string field (invalid start byte at byte 0)",
    ]


@pytest.mark.parametrize("share", [0.01, 0.1, 0.5])
@pytest.mark.parametrize("shape", ["plain", "order"])
def test_good_rows_of_a_mixed_batch_decode_exactly(shape: str, share: float) -> None:
    codec, good = _codec(shape)
    good = good * 5
    rng = random.Random(int(share * 1000))
    clean = codec.decode_batch(pa.array(good, pa.binary())).batch
    mixed: list[bytes] = []
    kept: list[int] = []
    for i, p in enumerate(good):
        if rng.random() < share:
            cut = p[: rng.randint(5, len(p) - 1)]
            mixed.append(cut if rng.random() < 0.5 else p[:5] + rng.randbytes(len(p) - 5))
        else:
            mixed.append(p)
            kept.append(i)
    res = assert_agrees(codec, mixed)
    assert res.batch.equals(clean.take(pa.array(kept, pa.int64())))
    assert {e.index for e in res.errors} | set(kept) == set(range(len(mixed)))
    exact, _ = _codec(shape, engine="fastavro")
    assert exact.decode_batch(pa.array(mixed, pa.binary())).batch.equals(res.batch)


def test_bad_rows_reach_the_dlq_with_their_bytes_locator_and_text() -> None:
    codec, good = _codec("plain")
    values = [good[0], good[1][:12], good[2], good[3] + b"\x01", good[4]]
    batch = raw_values(values, partition=1, first=10)
    out = run_flow(
        [("orders:1", batch)],
        lambda up: twg.decode("decode", up, codec),
        flow_id="avro_reject",
    )
    ok, rejected = out["ok"], out["rejected"]
    assert [b.num_rows for _, b in ok] == [3]
    got = {locator_of(r).offset: r for r in rejected_from_dlq_batch(rejected[0][1])}
    assert sorted(got) == [11, 13]
    for offset, r in got.items():
        value = values[offset - 10]
        try:
            codec.decode_value(value)
        except AvroDecodeError as exc:
            text = str(exc)
        assert r.reason == "decode" and r.raw_value == value
        assert r.raw_key == f"k{offset - 10}".encode()
        assert locator_of(r).topic == "orders" and locator_of(r).partition == 1
        assert r.message == f"avro decode failed at `orders:1@{offset}` (malformed): {text}"


@pytest.mark.parametrize("shape", ["plain", "order"])
def test_structurally_bad_bodies_are_rejected_without_a_fastavro_read_each(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body cut short or with bytes left over is found by its structure, columnar."""
    codec, good = _codec(shape)
    rng = random.Random(3)
    bad = [p[: rng.randint(5, len(p) - 1)] for p in good * 4] + [p + b"\x00" for p in good]
    calls = 0
    real = fastavro.schemaless_reader

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(fastavro, "schemaless_reader", counting)
    res = codec.decode_batch(pa.array(bad, pa.binary()))
    assert len(res.errors) == len(bad)
    # Only a body with a non-ASCII string before its end (one record in ten here, it
    # may be invalid UTF-8, which fastavro reports first) needs fastavro's word.
    assert calls <= len(bad) // 5, calls


_PROPERTY_CODEC: dict[str, tuple[AvroCodec, list[bytes]]] = {}


def _property_codec(shape: str) -> tuple[AvroCodec, list[bytes]]:
    if shape not in _PROPERTY_CODEC:
        _PROPERTY_CODEC[shape] = _codec(shape)
    return _PROPERTY_CODEC[shape]


_edit = st.tuples(
    st.sampled_from(["cut", "flip", "append", "splice"]),
    st.integers(0, 10_000),
    st.binary(min_size=1, max_size=6),
)


@given(
    shape=st.sampled_from(["plain", "order"]),
    rows=st.lists(st.tuples(st.integers(0, 59), st.lists(_edit, max_size=2)), max_size=12),
)
def test_damaged_bodies_in_any_mix_fail_or_decode_like_decode_value(
    shape: str, rows: list[tuple[int, list[tuple[str, int, bytes]]]]
) -> None:
    codec, good = _property_codec(shape)
    payloads = []
    for i, edits in rows:
        p = bytearray(good[i])
        for what, at, extra in edits:
            k = 5 + at % max(len(p) - 5, 1)
            if what == "cut":
                del p[k:]
            elif what == "flip" and k < len(p):
                p[k] ^= extra[0]
            elif what == "append":
                p += extra
            else:
                p[k:k] = extra
        payloads.append(bytes(p))
    res = assert_agrees(codec, payloads)
    assert res.batch.num_rows + len(res.errors) == len(payloads)


def test_a_uuid_the_fast_path_would_pass_through_unparsed_is_decided_exactly() -> None:
    """polars reads a ``uuid`` as any text; the batch must say what decode_value says."""
    codec, good = _codec("order")
    body = good[0]
    at = body.index(b"H") + 1  # the order id: a 36-character uuid string
    text = body[at : at + 36].decode()
    not_a_uuid = body[:at] + b">" + body[at + 1 :]
    upper = body[:at] + text.upper().encode() + body[at + 36 :]
    for payloads in ([not_a_uuid], [upper], [good[1], not_a_uuid, upper, good[2]]):
        res = assert_agrees(codec, payloads)
        assert not any(e.message.endswith(_TAG_TEXT) for e in res.errors)
    res = codec.decode_batch(pa.array([upper], pa.binary()))
    assert res.batch.column("order_id").to_pylist() == [text] == [
        codec.decode_value(upper)["order_id"]
    ]
