"""Child process of test_avro_walk_fuzz.py: the Avro walk and codec on mutated bodies, capped.

Caps its address space with ``RLIMIT_AS`` at what it maps after start-up plus the
headroom given (MiB), then, per schema, walks and decodes seeded mutants of written
bodies (counts and lengths near 2**63 and varints of eleven bytes spliced in), and
walks and decodes hand-made attacks (2**62 records that take no byte, a negative block
count of INT64_MIN, nested arrays of millions of empty records), each one a DLQ row.
Decoding runs on both engines, with the native walk and without it, under an alarm: a
body that reached an unbounded reader ends the process. Prints one JSON line per schema
(rows walked, rows the walk proved, rows decoded and rejected, the attacks' statuses)
and a last one with the peak resident memory. Any exception ends the process with a
traceback, which the test reports.
"""

from __future__ import annotations

import io
import json
import logging
import random
import resource
import signal
import sys
from typing import Any

import fastavro
import pyarrow as pa

from tests.codecs.avro_wire import zz
from thalweg_bytewax.codecs import _avro_walk
from thalweg_bytewax.codecs.avro import AvroCodec

_EMPTY = {"type": "record", "name": "Empty", "fields": []}
SCHEMAS: dict[str, dict[str, Any]] = {
    "scalars": {
        "type": "record",
        "name": "S",
        "fields": [
            {"name": "b", "type": "boolean"},
            {"name": "i", "type": "int"},
            {"name": "l", "type": "long"},
            {"name": "f", "type": "float"},
            {"name": "d", "type": "double"},
            {"name": "s", "type": "string"},
            {"name": "y", "type": "bytes"},
            {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
            {"name": "x", "type": {"type": "fixed", "name": "X", "size": 3}},
            {
                "name": "m",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
            },
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "n", "type": ["null", "string"]},
        ],
    },
    "nested": {
        "type": "record",
        "name": "N",
        "fields": [
            {
                "name": "rows",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "Item",
                        "fields": [
                            {"name": "k", "type": "string"},
                            {"name": "v", "type": ["null", "long"]},
                            {"name": "tags", "type": {"type": "array", "items": "string"}},
                        ],
                    },
                },
            },
            {"name": "attrs", "type": {"type": "map", "values": "long"}},
            {"name": "any", "type": ["null", "int", "string"]},
        ],
    },
    "empty_items": {
        "type": "record",
        "name": "Z",
        "fields": [
            {"name": "a", "type": {"type": "array", "items": _EMPTY}},
            {"name": "aa", "type": {"type": "array", "items": {"type": "array", "items": "Empty"}}},
        ],
    },
}


def _records(name: str, rng: random.Random, n: int) -> list[dict[str, Any]]:
    import decimal  # noqa: PLC0415
    import uuid  # noqa: PLC0415
    from datetime import UTC, datetime, timedelta  # noqa: PLC0415

    out: list[dict[str, Any]] = []
    for k in range(n):
        if name == "scalars":
            out.append(
                {
                    "b": k % 2 == 0,
                    "i": rng.randint(-(2**31), 2**31 - 1),
                    "l": rng.randint(-(2**63), 2**63 - 1),
                    "f": rng.random(),
                    "d": rng.random(),
                    "s": "x" * rng.randint(0, 20),
                    "y": rng.randbytes(rng.randint(0, 9)),
                    "u": str(uuid.UUID(int=rng.getrandbits(128))),
                    "e": rng.choice("ABC"),
                    "x": rng.randbytes(3),
                    "m": decimal.Decimal(rng.randint(-(10**11), 10**11)).scaleb(-2),
                    "t": datetime(2020, 1, 1, tzinfo=UTC) + timedelta(seconds=k),
                    "n": None if k % 3 else "s",
                }
            )
        elif name == "nested":
            out.append(
                {
                    "rows": [
                        {"k": str(j), "v": j if j % 2 else None, "tags": ["t"] * (j % 3)}
                        for j in range(rng.randint(0, 4))
                    ],
                    "attrs": {str(j): j for j in range(rng.randint(0, 3))},
                    "any": rng.choice([None, 7, "seven"]),
                }
            )
        else:
            out.append({"a": [{}] * rng.randint(0, 5), "aa": [[{}] * 2] * rng.randint(0, 3)})
    return out


_HUGE = [zz(2**62), zz(-(2**63)), zz(2**63 - 1), zz(-(2**62)), b"\xff" * 11, b"\x80" * 10]


def _mutants(body: bytes, rng: random.Random, k: int) -> list[bytes]:
    out = []
    for _ in range(k):
        b = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            how = rng.randrange(5)
            at = rng.randint(0, len(b))
            if how == 0 and b:
                b[at % len(b)] = rng.randrange(256)
            elif how == 1:
                b[at:at] = rng.choice(_HUGE)
            elif how == 2:
                del b[at : at + rng.randint(1, 4)]
            elif how == 3:
                b[at:at] = rng.randbytes(rng.randint(1, 6))
            else:
                b = b[:at]
        out.append(bytes(b))
    return out


def _attacks() -> list[bytes]:
    """Bodies of the empty_items schema that claim enormous or endless work."""
    return [
        zz(2**62) + b"\x00" + b"\x00",  # 2**62 records that take no byte
        zz(-(2**63)) + b"\x00" + b"\x00",  # a block count with no positive form
        zz(-(2**62)) + zz(0) + b"\x00" + b"\x00",  # a sized block of nothing
        b"\x00" + b"".join(zz(1) + zz(60_000) + b"\x00" for _ in range(1000)) + b"\x00",
        b"\x00" + zz(1000) + (zz(60_000) + b"\x00") * 1000 + b"\x00",
        zz(65_536) + b"\x00" + zz(1) + zz(1) + b"\x00\x00",  # budget spent, then one more
    ]


_NATIVE = _avro_walk.NATIVE
_DECODE_SECONDS = 120  # one schema's mutants on both engines, with and without the extension


def _vm_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def main() -> None:
    headroom_mb = int(sys.argv[1])
    logging.disable(logging.WARNING)
    cap = _vm_kb("VmSize:") * 1024 + (headroom_mb << 20)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    rng = random.Random(20261206)
    for name, schema in SCHEMAS.items():
        parsed = fastavro.parse_schema(schema)
        written = []
        for rec in _records(name, rng, 40):
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, parsed, rec)
            written.append(buf.getvalue())
        bodies = written + [m for b in written for m in _mutants(b, rng, 25)]
        if name == "empty_items":
            bodies += _attacks()
        codec = AvroCodec(framing="none", schema=schema)
        code = _avro_walk.program(codec._schemas.writers["fixed"].node)
        assert code is not None
        proven = 0
        for canonical in (True, False):
            walked = _avro_walk.walk(code, pa.array(bodies, pa.binary()), canonical=canonical)
            assert walked is not None
            assert walked.status[: len(written)].tolist() == [0] * len(written)
            proven = len(bodies) - walked.bad if canonical else proven
        decoded = rejected = 0
        assert walked is not None
        line: dict[str, Any] = {"schema": name, "rows": len(bodies), "proven": proven}
        if name == "empty_items":
            line["attacks"] = walked.status[len(bodies) - len(_attacks()) :].tolist()
        # fastavro (the exact path) reads a block of items that take no byte one by one,
        # with no bound of its own: a body that reached it would hang here. The alarm's
        # default action ends the process, which the test reports.
        signal.alarm(_DECODE_SECONDS)
        for engine in ("auto", "fastavro"):
            for native in (True, False):
                _avro_walk.NATIVE = native and _NATIVE
                decoder = AvroCodec(framing="none", schema=schema, engine=engine)
                for start in range(0, len(bodies), 200):
                    chunk = bodies[start : start + 200]
                    result = decoder.decode_batch(chunk)
                    assert result.batch.num_rows + len(result.errors) == len(chunk)
                    decoded += result.batch.num_rows
                    rejected += len(result.errors)
                    if name == "empty_items":  # every attack is a row of the DLQ
                        hit = {f.index for f in result.errors}
                        first = len(bodies) - len(_attacks()) - start
                        assert set(range(max(first, 0), len(chunk))) <= hit
        signal.alarm(0)
        _avro_walk.NATIVE = _NATIVE
        print(json.dumps({**line, "decoded": decoded, "rejected": rejected}), flush=True)
    print(json.dumps({"peak_rss_mb": _vm_kb("VmHWM:") // 1024}), flush=True)


if __name__ == "__main__":
    main()
