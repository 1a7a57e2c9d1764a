r"""Sandboxed WASM functions over keyed Arrow batches: ``twg.wasm_map`` and ``twg.wasm_sql``.

Sensor readings (keyed batches with their locator, as ``twg.decode`` emits them) get a
Fahrenheit column from a Rust function compiled to WebAssembly, then a SQL query that
calls WASM functions by name. A function that traps on a row (integer division by
zero) sends that row to the DLQ with reason ``udf``; the flow goes on. Run it from the
repository's root::

    python docs/examples/howto_wasm_udf.py
"""

from __future__ import annotations

from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
import wasmtime
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource, run_main

import thalweg_bytewax.operators as twg
from thalweg_bytewax.udf import WasmFunction, WasmModule

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests/fixtures/wasm/udf_example/udf_example.wasm"

# A function written in WAT text: total / count per row, integer division, which traps
# when count is 0. The ABI: n, each argument's (values, validity), the output's
# (values, validity); it returns 0.
PER_ITEM = """
(module
  (memory (export "memory") 1)
  (global $top (mut i32) (i32.const 1024))
  (func (export "twg_alloc") (param $size i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $top))
    (global.set $top (i32.and (i32.add (i32.add (local.get $p) (local.get $size)) (i32.const 7))
                              (i32.const -8)))
    (if (i32.gt_u (global.get $top) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.add (i32.shr_u (global.get $top) (i32.const 16))
                                              (i32.const 1))) (i32.const -1))
              (then (return (i32.const 0))))))
    (local.get $p))
  (func (export "per_item")
    (param $n i32) (param $a i32) (param $av i32) (param $b i32) (param $bv i32)
    (param $out i32) (param $ov i32) (result i32)
    (local $i i32) (local $at i32)
    (loop $rows
      (local.set $at (i32.shl (local.get $i) (i32.const 3)))
      (i64.store (i32.add (local.get $out) (local.get $at))
        (i64.div_s (i64.load (i32.add (local.get $a) (local.get $at)))
                   (i64.load (i32.add (local.get $b) (local.get $at)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $rows (i32.lt_u (local.get $i) (local.get $n))))
    (i32.const 0)))
"""


def readings(
    partition: int, first: int, celsius: list[float], totals: list[int], counts: list[int]
) -> pa.RecordBatch:
    """One poll of one source partition, with its locator columns."""
    n = len(celsius)
    return pa.RecordBatch.from_pydict(
        {
            "celsius": pa.array(celsius, pa.float64()),
            "total": pa.array(totals, pa.int64()),
            "count": pa.array(counts, pa.int64()),
            "_twg_source_topic": ["sensors"] * n,
            "_twg_source_partition": pa.array([partition] * n, pa.int32()),
            "_twg_source_offset": pa.array(range(first, first + n), pa.int64()),
        }
    )


BATCHES = [
    ("sensors:0", readings(0, 0, [0.0, 21.5, 100.0], [10, 9, 8], [2, 3, 4])),
    ("sensors:0", readings(0, 3, [-40.0, 37.0], [5, 6], [0, 2])),  # count 0 at offset 3
]


def main() -> None:
    """Build and run the flow, then print what each output received."""
    module = WasmModule.from_file(EXAMPLE)
    c2f = WasmFunction(module, "celsius_to_fahrenheit", args=["float64"], returns="float64")
    per_item = WasmFunction(
        WasmModule(wasmtime.wat2wasm(PER_ITEM), name="per_item.wat"),
        "per_item",
        args=["int64", "int64"],
        returns="int64",
    )
    safe_div = WasmFunction(module, "safe_div", args=["int64", "int64"], returns="int64")

    flow = Dataflow("wasm_udf")
    keyed = op.key_on("key", op.input("in", flow, TestingSource(BATCHES)), lambda kv: kv[0])
    batches = op.map_value("batch", keyed, lambda kv: kv[1])

    # One function over columns of each batch: the result becomes a column.
    warm = twg.wasm_map("to_f", batches, c2f, args=["celsius"], output="fahrenheit")
    items = twg.wasm_map("per_item", warm.ok, per_item, args=["total", "count"], output="each")
    # WASM functions called by name in SQL (safe_div is null where the divisor is 0).
    out = twg.wasm_sql(
        "enrich",
        items.ok,
        "SELECT fahrenheit, each, safe_div(total, count + 1) AS per_slot FROM input",
        functions=[safe_div],
    )

    ok: list[tuple[str, pa.RecordBatch]] = []
    dlq: list[tuple[str, pa.RecordBatch]] = []
    op.output("ok", out.ok, TestingSink(ok))
    for name, stream in (
        ("dlq_f", warm.rejected),
        ("dlq_i", items.rejected),
        ("dlq_sql", out.rejected),
    ):
        op.output(name, stream, TestingSink(dlq))
    run_main(flow)

    for _, batch in ok:
        rows = zip(
            batch.column("_twg_source_offset").to_pylist(),
            batch.column("fahrenheit").to_pylist(),
            batch.column("each").to_pylist(),
            batch.column("per_slot").to_pylist(),
            strict=True,
        )
        for offset, fahrenheit, each, per_slot in rows:
            print(f"ok: offset {offset} fahrenheit={fahrenheit} each={each} per_slot={per_slot}")
    for _, batch in dlq:
        for row in batch.to_pylist():
            message = row["message"].split(": ", 2)[-1]
            print(f"dlq: offset {row['_twg_source_offset']} {row['reason']} {message}")


if __name__ == "__main__":
    main()
