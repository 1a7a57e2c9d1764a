"""Bad-row benchmark: each codec's ``decode_batch`` at 0 % and 100 % bad records.

Usage::

    python benchmarks/bad_rows.py [--records 20000] [--batch 5000] [--codec avro ...]

A flood of bad records (a broken upstream deploy) must not stall a flow: the goal is
that a batch of only bad records decodes within 5x of the clean rate. For each codec
(Avro, Protobuf, JSON) and two shapes, the nested sample order
(:mod:`thalweg_bytewax.dev.samples`) and a plain record of eight scalars, it times
``decode_batch`` over ``pa.BinaryArray`` batches of:

* ``clean`` — every record good (the baseline of the same run);
* ``truncated`` — each body cut at a random byte (the frame kept);
* ``garbage`` — each body replaced by random bytes of its length (the frame kept);
* ``unknown-id`` — Confluent frames naming a schema id the registry does not hold
  (Avro and Protobuf, both on a ``mock://`` registry);
* ``mixed-1%`` and ``mixed-10%`` — good records with one in 100 (one in 10) replaced
  by its truncated or garbage variant, alternately: the good rows of a batch that
  holds a few bad ones must stay on the columnar path.

It prints records/s, CPU microseconds per record (``time.process_time``) and the CPU
ratio bad/clean, checks that every bad record came back as a failure (the DLQ row:
reason ``decode``, its error text, its raw bytes), and prints the results as JSON last.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import base64
import io
import json
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pyarrow as pa
from _harness import peak_rss_mb  # noqa: E402

from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.dev.samples import (
    ORDER_AVRO_SCHEMA,
    ORDER_JSON_SCHEMA,
    encode_order_avro,
    sample_orders,
)

GOAL = 5.0
"""A batch of only bad records may cost at most this many times its clean CPU time."""
UNKNOWN_ID = 99_999
"""A schema id no benchmark registry holds."""

Decoder = Callable[[pa.Array], Any]
Case = tuple[Decoder, dict[str, list[bytes]]]

PLAIN_AVRO: dict[str, Any] = {
    "type": "record",
    "name": "Plain",
    "namespace": "thalweg.bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "account", "type": "int"},
        {"name": "amount", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "active", "type": "boolean"},
        {"name": "name", "type": "string"},
        {"name": "code", "type": "string"},
        {"name": "seen_ms", "type": "long"},
    ],
}
PLAIN_JSON: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "account": {"type": "integer"},
        "amount": {"type": "number"},
        "ratio": {"type": "number"},
        "active": {"type": "boolean"},
        "name": {"type": "string"},
        "code": {"type": "string"},
        "seen_ms": {"type": "integer"},
    },
    "required": ["id", "account", "amount", "ratio", "active", "name", "code", "seen_ms"],
}


def plain_records(n: int, seed: int = 11) -> Iterator[dict[str, Any]]:
    """Deterministic flat records of :data:`PLAIN_AVRO`'s shape."""
    rng = random.Random(seed)
    for i in range(n):
        yield {
            "id": i,
            "account": rng.randint(0, 2**31 - 1),
            "amount": round(rng.uniform(-1e6, 1e6), 2),
            "ratio": rng.random(),
            "active": rng.random() < 0.5,
            "name": f"customer-{rng.randint(0, 10**6)}",
            "code": rng.choice(["EUR", "GBP", "USD", "CHF"]),
            "seen_ms": 1_767_225_600_000 + i,
        }


def corrupt(good: list[bytes], frame_len: int, seed: int = 3) -> dict[str, list[bytes]]:
    """The ``truncated`` and ``garbage`` variants of ``good`` (first ``frame_len`` kept)."""
    rng = random.Random(seed)
    truncated, garbage = [], []
    for p in good:
        body = len(p) - frame_len
        truncated.append(p[: frame_len + rng.randint(1, max(body - 1, 1))])
        garbage.append(p[:frame_len] + rng.randbytes(body))
    return {"truncated": truncated, "garbage": garbage}


def mixed(good: list[bytes], bad: dict[str, list[bytes]]) -> dict[str, list[bytes]]:
    """``good`` with every 100th (10th) record replaced by a truncated or garbage one."""
    out = {}
    for label, step in (("mixed-1%", 100), ("mixed-10%", 10)):
        rows = list(good)
        for j, i in enumerate(range(step // 2, len(rows), step)):
            rows[i] = bad["truncated" if j % 2 == 0 else "garbage"][i]
        out[label] = rows
    return out


def with_unknown_id(good: list[bytes]) -> list[bytes]:
    """``good`` re-framed with :data:`UNKNOWN_ID` (magic byte and body kept)."""
    return [p[:1] + UNKNOWN_ID.to_bytes(4, "big") + p[5:] for p in good]


# ------------------------------------------------------------------------------ avro


def avro_case(shape: str, n: int) -> Case:
    import fastavro
    from confluent_kafka.schema_registry import Schema

    from thalweg_bytewax.codecs.avro import AvroCodec
    from thalweg_bytewax.registry import registry_client

    url = f"mock://bench-bad-rows-avro-{shape}"
    schema = ORDER_AVRO_SCHEMA if shape == "order" else PLAIN_AVRO
    sid = registry_client(url).register_schema(f"{shape}-value", Schema(json.dumps(schema)))
    if shape == "order":
        good = [encode_order_avro(o, schema_id=sid) for o in sample_orders(n)]
    else:
        parsed = fastavro.parse_schema(PLAIN_AVRO)
        good = []
        for r in plain_records(n):
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, parsed, r)
            good.append(encode_confluent(sid, buf.getvalue()))
    codec = AvroCodec(url)
    bad = corrupt(good, 5)
    return codec.decode_batch, {
        "clean": good,
        **bad,
        "unknown-id": with_unknown_id(good),
        **mixed(good, bad),
    }


# -------------------------------------------------------------------------- protobuf


def _plain_proto_file() -> Any:
    from google.protobuf import descriptor_pb2

    fdp = descriptor_pb2.FileDescriptorProto(
        name="thalweg/bench/plain.proto", package="thalweg.bench", syntax="proto3"
    )
    msg = fdp.message_type.add(name="Plain")
    f = descriptor_pb2.FieldDescriptorProto
    for i, (name, t) in enumerate(
        [("id", f.TYPE_INT64), ("account", f.TYPE_INT32), ("amount", f.TYPE_DOUBLE),
         ("ratio", f.TYPE_FLOAT), ("active", f.TYPE_BOOL), ("name", f.TYPE_STRING),
         ("code", f.TYPE_STRING), ("seen_ms", f.TYPE_INT64)],  # fmt: skip
        start=1,
    ):
        msg.field.add(name=name, number=i, type=t, label=f.LABEL_OPTIONAL)
    return fdp


def protobuf_case(shape: str, n: int) -> Case:
    from confluent_kafka.schema_registry import Schema
    from google.protobuf import descriptor_pool, message_factory

    from thalweg_bytewax.codecs.protobuf import ProtobufCodec
    from thalweg_bytewax.dev.samples import order_file_descriptor_proto, order_to_proto
    from thalweg_bytewax.registry import registry_client

    url = f"mock://bench-bad-rows-protobuf-{shape}"
    client = registry_client(url)
    if shape == "order":
        # google/protobuf/timestamp.proto is built in (never sent as a reference).
        fdp, indexes = order_file_descriptor_proto(), [2]
    else:
        fdp, indexes = _plain_proto_file(), [0]
    text = base64.b64encode(fdp.SerializeToString()).decode()
    sid = client.register_schema(f"{shape}-proto-value", Schema(text, "PROTOBUF"))
    if shape == "order":
        bodies = [order_to_proto(o).SerializeToString() for o in sample_orders(n)]
    else:
        pool = descriptor_pool.DescriptorPool()
        pool.Add(fdp)
        cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("thalweg.bench.Plain"))
        bodies = [cls(**r).SerializeToString() for r in plain_records(n)]
    good = [encode_confluent(sid, b, message_indexes=indexes) for b in bodies]
    codec = ProtobufCodec(url)
    frame_len = len(good[0]) - len(bodies[0])
    bad = corrupt(good, frame_len)
    return codec.decode_batch, {
        "clean": good,
        **bad,
        "unknown-id": with_unknown_id(good),
        **mixed(good, bad),
    }


# ------------------------------------------------------------------------------ json


def json_case(shape: str, n: int) -> Case:
    from thalweg_bytewax.codecs.json import JsonCodec

    if shape == "order":
        good = [orjson.dumps(o, default=str) for o in sample_orders(n)]
        codec = JsonCodec(ORDER_JSON_SCHEMA)
    else:
        good = [orjson.dumps(r) for r in plain_records(n)]
        codec = JsonCodec(PLAIN_JSON)
    bad = corrupt(good, 0)
    return codec.decode_batch, {"clean": good, **bad, **mixed(good, bad)}


CASES: dict[str, Callable[[str, int], Case]] = {
    "avro": avro_case,
    "json": json_case,
    "protobuf": protobuf_case,
}


def _time(decode: Decoder, chunks: list[pa.Array]) -> tuple[float, float, int, int]:
    wall, cpu = time.perf_counter(), time.process_time()
    ok = bad = 0
    for c in chunks:
        res = decode(c)
        ok += res.batch.num_rows
        bad += len(res.errors)
    return time.perf_counter() - wall, time.process_time() - cpu, ok, bad


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=5_000)
    ap.add_argument("--codec", action="append", choices=sorted(CASES))
    ap.add_argument("--repeat", type=int, default=3, help="best of N timed runs")
    args = ap.parse_args(argv)
    results: list[dict[str, Any]] = []
    worst = 0.0
    for name in args.codec or sorted(CASES):
        for shape in ("order", "plain"):
            decode, variants = CASES[name](shape, args.records)
            clean_cpu = 0.0
            for kind, payloads in variants.items():
                arr = pa.array(payloads, pa.binary())
                chunks = [arr.slice(i, args.batch) for i in range(0, len(arr), args.batch)]
                decode(chunks[0])  # warm-up: schema lookups, first-use logging
                best = min(
                    (_time(decode, chunks) for _ in range(args.repeat)), key=lambda t: t[1]
                )
                wall, cpu, ok, bad = best
                n = len(payloads)
                if kind == "clean":
                    clean_cpu = cpu
                    assert bad == 0, f"{name} {shape}: clean records failed"
                else:
                    # A truncated protobuf body can still parse (a field boundary); the
                    # rest must all be failures, each one a DLQ row.
                    assert ok + bad == n, f"{name} {shape} {kind}: rows lost"
                ratio = cpu / clean_cpu if clean_cpu else 1.0
                if kind != "clean":
                    worst = max(worst, ratio)
                results.append(
                    {
                        "codec": name, "shape": shape, "kind": kind,
                        "records_per_s": round(n / wall),
                        "cpu_us_per_record": round(1e6 * cpu / n, 2),
                        "failed": bad, "cpu_ratio_vs_clean": round(ratio, 2),
                    }
                )  # fmt: skip
                print(
                    f"{name:8} {shape:5} {kind:10} {n / wall:>10,.0f} rec/s "
                    f"{1e6 * cpu / n:8.2f} CPU us/rec  failed {bad:>6}  "
                    f"x{ratio:5.2f} clean CPU  peak RSS {peak_rss_mb():5.0f} MB"
                )
    print(f"worst bad/clean CPU ratio: {worst:.2f} (goal <= {GOAL})")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
