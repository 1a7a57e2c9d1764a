"""Decode benchmark: codecs' columnar ``decode_batch`` vs a per-record baseline, same run.

Usage::

    python benchmarks/decode.py [--records 100000] [--batch 10000] [--codec avro ...]

Each case encodes the same deterministic sample orders (thalweg_bytewax.dev.samples), then
times, in this process:

* ``baseline`` — the per-record path users write today, then ``pa.Table.from_pylist``
  (Avro: fastavro ``schemaless_reader`` per payload; Protobuf: ``FromString`` +
  ``MessageToDict`` per payload; JSON: ``orjson.loads`` per payload);
* ``columnar`` — the codec's ``decode_batch`` over ``pa.BinaryArray`` batches;
* for JSON also ``pyarrow.json`` — ``decode_batch`` with ``engine="pyarrow"`` (what an
  installation without the native reader runs);
* for Avro also ``exact`` — ``decode_batch`` with the polars fast path off.

It prints records/s and MB/s per case and the peak RSS of the process
(``resource.getrusage``; RSS only grows, so cases run smallest-first and the number is
an upper bound). Add a codec by adding a function to ``CASES`` that returns
``(payloads, {name: callable})``.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import io
import json
import time
from collections.abc import Callable
from typing import Any

import fastavro
import pyarrow as pa
from _harness import peak_rss_mb  # noqa: E402

from thalweg_bytewax.dev.samples import (
    ORDER_AVRO_SCHEMA,
    ORDER_JSON_SCHEMA,
    encode_order_avro,
    sample_orders,
)

Runner = Callable[[], int]


def _batches(payloads: pa.Array, size: int) -> list[pa.Array]:
    return [payloads.slice(i, size) for i in range(0, len(payloads), size)]


def avro_case(n: int, batch: int) -> tuple[pa.Array, dict[str, Runner]]:
    from confluent_kafka.schema_registry import Schema

    from thalweg_bytewax.codecs.avro import AvroCodec, AvroEngine
    from thalweg_bytewax.registry import registry_client

    url = "mock://bench-decode"
    sid = registry_client(url).register_schema(
        "orders-value", Schema(json.dumps(ORDER_AVRO_SCHEMA))
    )
    payloads = pa.array(
        [encode_order_avro(o, schema_id=sid) for o in sample_orders(n)], pa.binary()
    )
    chunks = _batches(payloads, batch)
    parsed = fastavro.parse_schema(ORDER_AVRO_SCHEMA)

    def baseline() -> int:
        rows = 0
        for chunk in chunks:
            recs = [
                fastavro.schemaless_reader(io.BytesIO(p[5:]), parsed, None)
                for p in chunk.to_pylist()
            ]
            for r in recs:  # from_pylist cannot take uuid.UUID objects
                r["order_id"] = str(r["order_id"])
            rows += pa.Table.from_pylist(recs).num_rows
        return rows

    def codec_runner(engine: AvroEngine) -> Runner:
        codec = AvroCodec(url, engine=engine)

        def run() -> int:
            return sum(codec.decode_batch(c).batch.num_rows for c in chunks)

        return run

    return payloads, {
        "baseline": baseline,
        "exact": codec_runner("fastavro"),
        "columnar": codec_runner("auto"),
    }


def protobuf_case(n: int, batch: int) -> tuple[pa.Array, dict[str, Runner]]:
    from google.protobuf.json_format import MessageToDict

    from thalweg_bytewax.codecs.protobuf import ProtobufCodec
    from thalweg_bytewax.dev.samples import (
        ORDER_MESSAGE_TYPE,
        encode_order_proto,
        order_descriptor_set,
        order_message_class,
    )

    payloads = pa.array([encode_order_proto(o) for o in sample_orders(n)], pa.binary())
    chunks = _batches(payloads, batch)
    cls = order_message_class()

    def baseline() -> int:
        rows = 0
        for chunk in chunks:
            # Confluent prefix: magic, 4-byte id, message indexes [2] (2 bytes).
            recs = [MessageToDict(cls.FromString(p[7:])) for p in chunk.to_pylist()]
            rows += pa.Table.from_pylist(recs).num_rows
        return rows

    codec = ProtobufCodec(descriptor_set=order_descriptor_set(), message_type=ORDER_MESSAGE_TYPE)

    def columnar() -> int:
        return sum(codec.decode_batch(c).batch.num_rows for c in chunks)

    return payloads, {"baseline": baseline, "columnar": columnar}


def json_case(n: int, batch: int) -> tuple[pa.Array, dict[str, Runner]]:
    import orjson

    from thalweg_bytewax.codecs.json import JsonCodec

    payloads = pa.array([orjson.dumps(o, default=str) for o in sample_orders(n)], pa.binary())
    chunks = _batches(payloads, batch)

    def baseline() -> int:
        rows = 0
        for chunk in chunks:
            rows += pa.Table.from_pylist([orjson.loads(p) for p in chunk.to_pylist()]).num_rows
        return rows

    codec = JsonCodec(ORDER_JSON_SCHEMA)  # the native reader when built
    fallback = JsonCodec(ORDER_JSON_SCHEMA, engine="pyarrow")

    def columnar() -> int:
        return sum(codec.decode_batch(c).batch.num_rows for c in chunks)

    def pyarrow_json() -> int:
        return sum(fallback.decode_batch(c).batch.num_rows for c in chunks)

    return payloads, {"baseline": baseline, "pyarrow.json": pyarrow_json, "columnar": columnar}


CASES: dict[str, Callable[[int, int], tuple[pa.Array, dict[str, Runner]]]] = {
    "avro": avro_case,
    "json": json_case,
    "protobuf": protobuf_case,
}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--codec", action="append", choices=sorted(CASES))
    args = ap.parse_args(argv)
    results: list[dict[str, Any]] = []
    for name in args.codec or sorted(CASES):
        payloads, runners = CASES[name](args.records, args.batch)
        mb = pa.compute.sum(pa.compute.binary_length(payloads)).as_py() / 1e6
        rates = {}
        for label, run in runners.items():
            run()  # warm-up: schema lookups, imports
            started = time.perf_counter()
            rows = run()
            secs = time.perf_counter() - started
            rates[label] = rows / secs
            results.append({"codec": name, "path": label, "records_per_s": round(rows / secs)})
            print(
                f"{name:8} {label:9} {rows:>8} records  {rows / secs:>12,.0f} rec/s  "
                f"{mb / secs:8.1f} MB/s  peak RSS {peak_rss_mb():7.0f} MB"
            )
        if "baseline" in rates:
            for label, rate in rates.items():
                if label != "baseline":
                    print(
                        f"{name:8} {label:9} speed-up vs baseline: {rate / rates['baseline']:.1f}x"
                    )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
