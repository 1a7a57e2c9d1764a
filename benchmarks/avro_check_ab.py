"""The Avro fast path's exactness check: the native walk, the column-wise check, no check.

``AvroCodec.decode_batch`` over Confluent-framed batches, in one process, timed in turns:

* ``native walk`` -- as installed: each body walked against the writer schema in C
  before polars runs (``thalweg_bytewax/codecs/_avro_native.c``); a batch of one
  writer schema whose bodies all walk clean is peeled, walked and joined into polars'
  block in that one pass;
* ``peel, then walk`` -- the same codec with that one pass switched off: the columnar
  Confluent peel, a sliced copy of the bodies, the walk, then the block (the general
  path, which every batch with a bad or foreign row takes);
* ``column checks`` -- the same codec with the walk switched off: the check over
  polars' decoded columns in NumPy and Arrow compute (what runs without a C compiler);
* ``polars.read_avro`` -- the floor's parse: the same bodies, frame stripped, in one
  container block, no checks (``benchmarks/_floor.py``);
* ``check alone`` -- the two checks by themselves on the same bodies (the walk on the
  bodies, the column check on polars' cast columns), thread CPU.

Which one goes first rotates each round, so a slow spell on the shared machine hits all
four. The figure is process CPU (user + system, every thread: polars may use more
than one) per record; the load average is printed with it.

Usage::

    python benchmarks/avro_check_ab.py --shape plain --shape sample --rounds 15
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import io
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from _decode_shapes import SHAPES, shape  # noqa: E402


def _decoders(name: str, tmp: _Path) -> dict[str, Callable[[pa.BinaryArray], Any]]:
    import polars as pl

    from thalweg_bytewax.codecs import AvroCodec, _avro_fast, _avro_walk
    from thalweg_bytewax.codecs._avro_ocf import ocf_block as _ocf_block
    from thalweg_bytewax.codecs._avro_ocf import ocf_header
    from thalweg_bytewax.registry import DirectorySchemaSource

    if not _avro_walk.NATIVE:
        raise SystemExit("the native Avro walk is not built: pip install -e .")
    _avro_fast._said_columns = True  # noqa: SLF001 - switched off on purpose: no warning
    shape_ = shape(name)
    (tmp / f"{shape_.schema_id}.avsc").write_text(json.dumps(shape_.avro_schema))
    codec = AvroCodec(DirectorySchemaSource(tmp))
    header = ocf_header(json.dumps(shape_.avro_schema))

    def native(values: pa.BinaryArray) -> Any:
        return codec.decode_batch(values).batch

    one_pass = _avro_walk.framed_block

    def peel_then_walk(values: pa.BinaryArray) -> Any:
        _avro_walk.framed_block = lambda *_a, **_k: None
        try:
            return codec.decode_batch(values).batch
        finally:
            _avro_walk.framed_block = one_pass

    def columns(values: pa.BinaryArray) -> Any:
        _avro_walk.NATIVE = False
        try:
            return codec.decode_batch(values).batch
        finally:
            _avro_walk.NATIVE = True

    def polars_avro(values: pa.BinaryArray) -> Any:
        bodies = pc.binary_slice(values, 5, 1 << 30)  # the Confluent frame: magic, schema id
        return pl.read_avro(io.BytesIO(_ocf_block(header, bodies))).to_arrow()

    return {
        "native walk": native,
        "peel, then walk": peel_then_walk,
        "column checks": columns,
        "polars.read_avro": polars_avro,
    }


def _measure(name: str, rows: int, rounds: int) -> None:
    shape_ = shape(name)
    values = [shape_.encode(o, "avro") for o in shape_.orders(rows * 4, seed=3)]
    batches = [pa.array(values[i * rows : (i + 1) * rows], pa.binary()) for i in range(4)]
    with tempfile.TemporaryDirectory() as tmp:
        decoders = _decoders(name, _Path(tmp))
        native = decoders["native walk"](batches[0])
        assert native.equals(decoders["column checks"](batches[0])), "the two checks differ"
        assert native.equals(decoders["peel, then walk"](batches[0])), "the two paths differ"
        times: dict[str, list[float]] = {label: [] for label in decoders}
        order = list(decoders.items())
        for round_ in range(rounds):
            k = round_ % len(order)
            for label, decode in order[k:] + order[:k]:  # who goes first rotates
                start = time.process_time()
                for _ in range(3):
                    for batch in batches:
                        decode(batch)
                times[label].append((time.process_time() - start) / (3 * 4 * rows) * 1e6)
        times.update(_checks_alone(name, batches, rounds))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{name}, {rows}-row batches, {rounds} rounds, load average {load}")
    for label, t in times.items():
        print(f"  {label:<22} {min(t):.3f} / {statistics.median(t):.3f} us a record (min / median)")


def _checks_alone(name: str, batches: list[pa.BinaryArray], rounds: int) -> dict[str, list[float]]:
    """The two checks by themselves on the same bodies (thread CPU: both run on one thread)."""
    import polars as pl

    from thalweg_bytewax.codecs import _avro_fast, _avro_ocf, _avro_walk
    from thalweg_bytewax.codecs.avro import AvroCodec

    shape_ = shape(name)
    codec = AvroCodec(framing="none", schema=shape_.avro_schema)
    node = codec._schemas.writers["fixed"].node  # noqa: SLF001 - the schema under test
    header = _avro_fast.ocf_header(json.dumps(shape_.avro_schema))
    code = _avro_walk.program(node)
    assert code is not None
    cases = []
    for batch in batches:
        bodies = pc.binary_slice(batch, 5, 1 << 30)
        block = _avro_ocf.ocf_block(header, bodies)  # as the fast path
        table = pl.read_avro(io.BytesIO(block)).to_arrow()
        arrays = [
            _avro_fast.cast_exact(table.column(i).combine_chunks(), c.arrow)
            for i, c in enumerate(node.children)
        ]
        cases.append((bodies, arrays))
    rows = sum(len(b) for b, _ in cases)
    checks = {
        "check alone: walk": lambda b, _a: _avro_walk.walk(code, b),
        "check alone: columns": lambda b, a: _avro_fast._columns_exact(b, a, node),  # noqa: SLF001
    }
    times: dict[str, list[float]] = {label: [] for label in checks}
    for round_ in range(rounds):
        order = list(checks.items())
        for label, check in order if round_ % 2 else order[::-1]:
            start = time.thread_time()
            for _ in range(3):
                for bodies, arrays in cases:
                    check(bodies, arrays)
            times[label].append((time.thread_time() - start) / (3 * rows) * 1e6)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES))
    parser.add_argument("--rows", type=int, default=10_000, help="rows a batch")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    for name in args.shape or ["plain"]:
        _measure(name, args.rows, args.rounds)


if __name__ == "__main__":
    main()
