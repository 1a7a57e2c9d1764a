"""Encode benchmark: encoders' columnar ``encode_batch`` vs Confluent's serializers per row.

Usage::

    python benchmarks/encode.py [--records 100000] [--batch 10000] [--codec avro ...]

Each case decodes the same deterministic sample orders (thalweg_bytewax.dev.samples) into
Arrow batches — what a sink receives — then times, in this process, on those batches:

* ``encode_batch`` — the encoder (Confluent framing, schema registered in a ``mock://``
  registry before timing);
* ``serializer`` — confluent-kafka's serializer (``AvroSerializer``,
  ``ProtobufSerializer``, ``JSONSerializer``) called once per row, on values built
  before the clock starts (dicts from ``to_pylist``; Protobuf messages; JSON dicts);
* ``to_pylist + serializer`` — the same, plus turning each batch into Python values
  (Avro, JSON: ``to_pylist``; Protobuf: ``to_pylist`` and building each message),
  which a sink holding Arrow batches must do before a per-row serializer.

It prints rows/s and CPU seconds per row (``time.process_time``) for each, best of
``--repeat`` runs. The serializers validate nothing beyond their own needs except
``JSONSerializer``, which validates every row against the schema (its default).
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import pyarrow as pa
from confluent_kafka.serialization import MessageField, SerializationContext

from thalweg_bytewax.codecs import (
    AvroCodec,
    AvroEncoder,
    JsonCodec,
    JsonEncoder,
    ProtobufCodec,
    ProtobufEncoder,
)
from thalweg_bytewax.dev.samples import (
    ORDER_AVRO_SCHEMA,
    ORDER_JSON_SCHEMA,
    ORDER_MESSAGE_TYPE,
    encode_order_avro,
    encode_order_json,
    encode_order_proto,
    order_descriptor_set,
    order_message_class,
    order_to_proto,
    sample_orders,
)
from thalweg_bytewax.registry import registry_client

Runner = Callable[[], int]
_CTX = SerializationContext("orders", MessageField.VALUE)


def _batches(
    payloads: list[bytes], size: int, decode: Callable[[pa.Array], pa.RecordBatch]
) -> list[pa.RecordBatch]:
    arr = pa.array(payloads, pa.binary())
    return [decode(arr.slice(i, size)) for i in range(0, len(arr), size)]


def _loop(ser: Any, values: list[Any]) -> int:
    for v in values:
        ser(v, _CTX)
    return len(values)


def avro_case(n: int, size: int) -> dict[str, Runner]:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    url = f"mock://bench-encode-{uuid.uuid4().hex}"
    codec = AvroCodec(framing="none", schema=ORDER_AVRO_SCHEMA)
    payloads = [encode_order_avro(o)[5:] for o in sample_orders(n)]
    batches = _batches(payloads, size, lambda a: codec.decode_batch(a).batch)
    enc = AvroEncoder(url, schema=ORDER_AVRO_SCHEMA, auto_register=True)
    enc.encode_batch(batches[0], topic="orders")
    ser = AvroSerializer(registry_client(url), json.dumps(ORDER_AVRO_SCHEMA))
    rows = [r for b in batches for r in b.to_pylist()]
    return {
        "encode_batch": lambda: sum(
            len(enc.encode_batch(b, topic="orders").values) for b in batches
        ),
        "serializer": lambda: _loop(ser, rows),
        "to_pylist + serializer": lambda: sum(_loop(ser, b.to_pylist()) for b in batches),
    }


def protobuf_case(n: int, size: int) -> dict[str, Runner]:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    url = f"mock://bench-encode-{uuid.uuid4().hex}"
    codec = ProtobufCodec(descriptor_set=order_descriptor_set(), message_type=ORDER_MESSAGE_TYPE)
    orders = list(sample_orders(n))
    batches = _batches(
        [encode_order_proto(o) for o in orders], size, lambda a: codec.decode_batch(a).batch
    )
    enc = ProtobufEncoder(
        url, order_descriptor_set(), message_type=ORDER_MESSAGE_TYPE, auto_register=True
    )
    enc.encode_batch(batches[0], topic="orders")
    ser = ProtobufSerializer(
        order_message_class(), registry_client(url), {"use.deprecated.format": False}
    )
    msgs = [order_to_proto(o) for o in orders]

    def build_and_serialize() -> int:
        # The per-row way from Arrow: to_pylist, then each sample dict to a message.
        for b in batches:
            b.to_pylist()
        return _loop(ser, [order_to_proto(o) for o in orders])

    return {
        "encode_batch": lambda: sum(
            len(enc.encode_batch(b, topic="orders").values) for b in batches
        ),
        "serializer": lambda: _loop(ser, msgs),
        "to_pylist + serializer": build_and_serialize,
    }


def json_case(n: int, size: int) -> dict[str, Runner]:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    url = f"mock://bench-encode-{uuid.uuid4().hex}"
    codec = JsonCodec(schema=ORDER_JSON_SCHEMA)
    payloads = [encode_order_json(o) for o in sample_orders(n)]
    batches = _batches(payloads, size, lambda a: codec.decode_batch(a).batch)
    enc = JsonEncoder(url, schema=ORDER_JSON_SCHEMA, auto_register=True, framing="confluent")
    enc.encode_batch(batches[0], topic="orders")
    ser = JSONSerializer(json.dumps(ORDER_JSON_SCHEMA), registry_client(url))
    docs = [orjson.loads(p) for p in payloads]

    def from_arrow() -> int:
        # to_pylist gives datetime / Decimal, which JSONSerializer cannot dump: the
        # exact text forms are what the caller would have to produce per row.
        count = 0
        for b in batches:
            rows = b.to_pylist()
            for r in rows:
                r["created_at"] = r["created_at"].isoformat()
            count += _loop(ser, rows)
        return count

    return {
        "encode_batch": lambda: sum(
            len(enc.encode_batch(b, topic="orders").values) for b in batches
        ),
        "serializer": lambda: _loop(ser, docs),
        "to_pylist + serializer": from_arrow,
    }


CASES = {"avro": avro_case, "protobuf": protobuf_case, "json": json_case}


def _time(run: Runner, repeat: int) -> tuple[float, float, int]:
    best_wall, best_cpu, rows = float("inf"), float("inf"), 0
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        rows = run()
        best_wall = min(best_wall, time.perf_counter() - w)
        best_cpu = min(best_cpu, time.process_time() - c)
    return best_wall, best_cpu, rows


def main() -> None:
    """Run the cases named on the command line and print one line per variant."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--codec", action="append", choices=sorted(CASES))
    args = parser.parse_args()
    for name in args.codec or list(CASES):
        runners = CASES[name](args.records, args.batch)
        base = None
        for variant, run in runners.items():
            wall, cpu, rows = _time(run, args.repeat)
            rate = rows / wall
            base = base or rate
            print(
                f"{name:9s} {variant:24s} {rate:>12,.0f} rows/s  "
                f"{cpu / rows * 1e6:7.2f} us CPU/row  encode_batch is {base / rate:5.1f}x this"
            )


if __name__ == "__main__":
    main()
