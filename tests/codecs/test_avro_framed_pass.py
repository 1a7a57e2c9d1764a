"""The usual Avro batch in one native pass: Confluent frames checked, bodies walked, one block.

A batch whose rows are all framed for one writer schema and all walk clean is peeled,
walked and joined for polars in one native call; any other batch takes the general path
(a columnar peel, a walk a group), which names each failing row. Both must decode the
same rows to the same batch and report a bad frame with the same reason.
"""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from confluent_kafka.schema_registry import Schema

from thalweg_bytewax.codecs import FailureKind, _avro_fast, _avro_walk
from thalweg_bytewax.codecs.avro import AvroCodec
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.registry import registry_client

pytestmark = pytest.mark.skipif(not _avro_walk.NATIVE, reason="needs the native Avro walk")

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Evt",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
        {"name": "note", "type": ["null", "string"]},
    ],
}
OTHER: dict[str, Any] = {  # a later version: one more field, with a default
    **SCHEMA,
    "fields": [*SCHEMA["fields"], {"name": "extra", "type": ["null", "long"], "default": None}],
}


def _body(schema: dict[str, Any], rec: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), rec)
    return buf.getvalue()


def _good(sid: int, i: int) -> bytes:
    note = None if i % 3 else f"note {i}"
    return encode_confluent(
        sid, _body(SCHEMA, {"id": i, "name": f"n{i}", "kind": "B", "note": note})
    )


@pytest.fixture
def env() -> tuple[str, int, int]:
    url = f"mock://avro-framed-{uuid.uuid4()}"
    client = registry_client(url)
    sid = client.register_schema("evt-value", Schema(json.dumps(SCHEMA)))
    other = client.register_schema("other-value", Schema(json.dumps(OTHER)))
    return url, sid, other


class _Spy:
    """``_avro_walk.framed_block`` counted: what each call returned (``None``: refused)."""

    def __init__(self, real: Any, *, off: bool = False) -> None:
        self.real, self.off = real, off
        self.results: list[bytes | None] = []

    def __call__(self, *args: Any, **kwargs: Any) -> bytes | None:
        got = None if self.off else self.real(*args, **kwargs)
        self.results.append(got)
        return got


def _decode(url: str, payloads: list[bytes], monkeypatch: pytest.MonkeyPatch, *, off: bool) -> Any:
    spy = _Spy(_avro_walk.framed_block, off=off)
    with monkeypatch.context() as m:
        m.setattr(_avro_walk, "framed_block", spy)
        result = AvroCodec(url).decode_batch(pa.array(payloads, pa.binary()))
    return result, spy


def test_a_usual_batch_is_decoded_in_one_pass_as_the_general_path_decodes_it(
    env: tuple[str, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, sid, _ = env
    payloads = [_good(sid, i) for i in range(50)]

    one, spy = _decode(url, payloads, monkeypatch, off=False)
    general, _ = _decode(url, payloads, monkeypatch, off=True)

    assert len(spy.results) == 1 and spy.results[0] is not None  # the one pass ran, and took it
    assert one.errors == [] == general.errors
    assert one.batch.equals(general.batch)
    assert one.batch.column("id").to_pylist() == list(range(50))
    assert one.batch.column("note").to_pylist()[:4] == ["note 0", None, None, "note 3"]


@pytest.mark.parametrize(
    ("case", "kind", "words"),
    [
        ("wrong magic byte", FailureKind.BAD_FRAMING, "magic byte 0; got 7"),
        ("too short for a frame", FailureKind.BAD_FRAMING, "too short"),
        ("unknown schema id", FailureKind.UNKNOWN_SCHEMA, "schema id 999"),
        ("truncated body", FailureKind.MALFORMED, "truncated"),
        ("bytes left over", FailureKind.MALFORMED, "2 bytes left over"),
    ],
)
def test_a_bad_row_leaves_the_one_pass_and_is_reported_as_the_general_path_reports_it(
    env: tuple[str, int, int],
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    kind: FailureKind,
    words: str,
) -> None:
    url, sid, _ = env
    good = _good(sid, 7)
    bad = {
        "wrong magic byte": b"\x07" + good[1:],
        "too short for a frame": b"\x00\x00",
        "unknown schema id": encode_confluent(999, good[5:]),
        "truncated body": good[:-3],
        "bytes left over": good + b"\x00\x00",
    }[case]
    payloads = [_good(sid, 0), _good(sid, 1), bad, _good(sid, 3)]

    one, spy = _decode(url, payloads, monkeypatch, off=False)
    general, _ = _decode(url, payloads, monkeypatch, off=True)

    assert spy.results == [None]  # refused by the one pass: the general path says why
    assert [(f.index, f.kind) for f in one.errors] == [(2, kind)]
    assert words in one.errors[0].message
    assert [(f.index, f.kind, f.message) for f in one.errors] == [
        (f.index, f.kind, f.message) for f in general.errors
    ]
    assert one.batch.equals(general.batch)
    assert one.batch.column("id").to_pylist() == [0, 1, 3]


def test_rows_of_two_writer_schemas_take_the_general_path_and_both_decode(
    env: tuple[str, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, sid, other = env
    payloads = [
        _good(sid, 0),
        encode_confluent(
            other, _body(OTHER, {"id": 9, "name": "n9", "kind": "A", "note": None, "extra": 4})
        ),
        _good(sid, 2),
    ]

    one, spy = _decode(url, payloads, monkeypatch, off=False)

    assert spy.results == [None]
    assert one.errors == []
    assert one.batch.column("id").to_pylist() == [0, 9, 2]
    assert one.batch.column("extra").to_pylist() == [None, 4, None]


def test_the_native_block_is_the_container_block_of_the_stripped_bodies(
    env: tuple[str, int, int],
) -> None:
    url, sid, _ = env
    codec = AvroCodec(url)
    payloads = pa.array([_good(sid, i) for i in range(20)], pa.binary())
    codec.decode_batch(payloads)  # the writer schema, compiled
    node = codec._schemas.get(sid).node  # noqa: SLF001 - the program under test
    header = _avro_fast.ocf_header(json.dumps(SCHEMA))
    sync = b"s" * 16
    for part in (payloads, payloads.slice(3, 11)):  # a slice: offsets that start mid-buffer
        block = _avro_walk.framed_block(node, part, sid, header, sync)
        bodies = pc.binary_slice(part, 5, 1 << 30)
        want = header + _zz(len(part)) + _zz(sum(len(b) for b in bodies.to_pylist()))
        assert block == want + b"".join(bodies.to_pylist()) + sync
    assert _avro_walk.framed_block(node, payloads, sid + 1, header, sync) is None  # another id


def _zz(n: int) -> bytes:
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)
