"""A WASM UDF over 1M rows beside the same transform in DuckDB SQL and pyarrow.compute.

The transform is ``celsius * 1.8 + 32`` over a float64 column with 1 % nulls, as:

* ``wasm``: :class:`~thalweg_bytewax.udf.WasmFunction` over the column (what
  ``twg.wasm_map`` runs per batch): ``--chunk-rows`` rows per call, each call a fresh
  fuel-metered, memory-capped instance, the buffers copied in and out;
* ``wasm, 2,048-row chunks``: the same at DuckDB's vector size;
* ``wasm in SQL``: ``SELECT c2f(celsius) FROM input`` through ``SqlNode`` (what
  ``twg.wasm_sql`` runs): DuckDB calls the function once per 2,048-row vector;
* ``SQL expression``: ``SELECT celsius * 1.8 + 32 FROM input`` through ``SqlNode``
  (what ``twg.sql`` runs);
* ``pyarrow.compute``: ``pc.add(pc.multiply(x, 1.8), 32.0)``.

Every path runs in the same process and run, over the same batch; each result is checked
against pyarrow's. Each figure is the median of ``--repeat`` passes: rows/s on the wall
clock and CPU ns per row on the process's CPU clock (DuckDB runs on the calling thread).

Run: taskset -c 1 python benchmarks/wasm_udf.py [--rows 1000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.sql.node import SqlNode
from thalweg_bytewax.udf import WasmFunction, WasmModule

EXAMPLE = Path(__file__).resolve().parents[1] / "tests/fixtures/wasm/udf_example/udf_example.wasm"


def readings(rows: int) -> pa.RecordBatch:
    rng = np.random.default_rng(1)
    values = rng.normal(15.0, 10.0, rows)
    nulls = rng.random(rows) < 0.01
    return pa.record_batch({"celsius": pa.array(values, mask=nulls)})


def measure(run: Callable[[], pa.Array], repeat: int) -> tuple[float, float, pa.Array]:
    walls, cpus = [], []
    out = run()  # warm: compile, open the database, prepare
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = run()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chunk-rows", type=int, default=65_536)
    args = parser.parse_args()

    batch = readings(args.rows)
    x = batch.column("celsius")
    expected = pc.add(pc.multiply(x, 1.8), 32.0)
    module = WasmModule.from_file(EXAMPLE)

    def udf(chunk_rows: int) -> WasmFunction:
        return WasmFunction(
            module, "celsius_to_fahrenheit", args=["float64"], returns="float64",
            name="c2f", chunk_rows=chunk_rows,
        )  # fmt: skip

    wasm = udf(args.chunk_rows)
    small = udf(2048)
    in_sql = SqlNode("c2f", "SELECT c2f(celsius) AS f FROM input", functions=[wasm])
    expr = SqlNode("expr", "SELECT celsius * 1.8 + 32 AS f FROM input")
    paths: list[tuple[str, Callable[[], pa.Array]]] = [
        (f"wasm ({args.chunk_rows:,}-row chunks)", lambda: wasm(x)),
        ("wasm (2,048-row chunks)", lambda: small(x)),
        ("wasm in SQL (twg.wasm_sql)", lambda: in_sql.run(batch).column("f")),
        ("SQL expression (twg.sql)", lambda: expr.run(batch).column("f")),
        ("pyarrow.compute", lambda: pc.add(pc.multiply(x, 1.8), 32.0)),
    ]
    print(f"{args.rows:,} rows, median of {args.repeat}")
    print("| path | rows/s | wall ms | CPU ns/row |")
    print("|---|---|---|---|")
    for name, run in paths:
        wall, cpu, out = measure(run, args.repeat)
        assert pc.all(pc.equal(out, expected)).as_py() and out.null_count == expected.null_count
        rate, ns = args.rows / wall / 1e6, cpu / args.rows * 1e9
        print(f"| {name} | {rate:.1f} M | {wall * 1e3:.1f} | {ns:.1f} |")


if __name__ == "__main__":
    main()
