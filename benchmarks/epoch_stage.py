"""Memory an Iceberg sink's epoch holds in tail mode: small SQL results, given or coalesced.

In tail mode a flow hands its Iceberg sinks a few rows at a time, each batch a DuckDB
result of the flow's SQL step, and the sink stages them until the epoch commits. Each
child process here runs a SQL step over ``--batches`` small batches of sample-order
shape (``--rows`` rows of 18 integer, a string and a list column), stages the results
in the sink's ``EpochStage`` and, at the end of each of ``--epochs`` epochs, hands them
over as the data-file write does. The two sides differ only in coalescing:

- ``as given``: every result staged as DuckDB returned it (the stage before coalescing);
- ``coalesced``: the stage as shipped, every 64 small batches of one schema copied into one.

Printed per side: the most ``malloc`` held during an epoch above the level before it
(``mallinfo2``: DuckDB's results), Arrow's pool bytes at the same point, the RSS peak,
and the CPU per batch of the whole loop (the SQL step, staging, the handover and the
results' release, which coalescing moves into the epoch). Sides alternate which runs
first:

    python benchmarks/epoch_stage.py --pairs 2
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import json
import sys
import time
from typing import Any

from _harness import malloc_mb, peak_rss_mb, rss_mb, run_child  # noqa: E402

SIDES = ("as given", "coalesced")


def _malloc_used() -> float:
    """MB ``malloc`` has handed out and not taken back; a refusal where unknown."""
    used = malloc_mb().get("malloc_in_use_mb")
    if used is None:
        raise SystemExit("epoch_stage: needs glibc's mallinfo2 (glibc 2.33 or later)")
    return used


def child(side: str, rows: int, batches: int, epochs: int) -> dict[str, Any]:
    """Stage ``epochs`` epochs of ``batches`` SQL results of ``rows`` rows; what they held."""
    import pyarrow as pa

    from thalweg_bytewax.connectors.iceberg import _staging
    from thalweg_bytewax.sql.engine import SqlSession

    if side == "as given":
        _staging.COALESCE_BATCHES = sys.maxsize  # type: ignore[misc]
    columns = {f"c{j}": pa.array(range(rows), pa.int64()) for j in range(18)}
    columns["customer"] = pa.array([f"customer-{i}" for i in range(rows)])
    columns["lines"] = pa.array([[i, i + 1] for i in range(rows)])
    given = pa.table(columns)
    # The flow's SQL step: prepared once, one DuckDB execution a batch.
    query = SqlSession(None, threads=1).prepare("given", "SELECT * FROM given WHERE c0 >= 0")
    for _ in range(20):  # DuckDB's own warm-up, outside what is measured
        query.run(given)
    held, pool, staged_rows = 0.0, 0, 0
    start = time.process_time()
    for _ in range(epochs):
        stage = _staging.EpochStage()
        before = _malloc_used()
        for _ in range(batches):
            for batch in query.run(given).to_batches():
                stage.add(batch)
        held = max(held, _malloc_used() - before)
        pool = max(pool, pa.total_allocated_bytes())
        written = pa.Table.from_batches(stage.take_batches())
        staged_rows += written.num_rows
        del written  # the results go at the handover, as the data-file write lets them
    cpu = time.process_time() - start
    return {
        "held_mb": held,
        "arrow_pool_mb": pool / 2**20,
        "rss_peak_mb": peak_rss_mb(),
        "rss_end_mb": rss_mb(),
        "cpu_us_per_batch": cpu / (epochs * batches) * 1e6,
        "rows": staged_rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=20, help="rows per SQL result")
    parser.add_argument("--batches", type=int, default=500, help="results staged an epoch")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=2, help="A/B pairs, order alternating")
    parser.add_argument("--json", action="store_true", help="one JSON object a child run")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.rows, args.batches, args.epochs)))
        return 0
    if not args.json:
        print(
            f"{args.batches} results of {args.rows} rows an epoch, {args.epochs} epochs, "
            f"one process a side"
        )
        print(f"{'side':<10} {'held':>9} {'pool':>9} {'RSS peak':>9} {'CPU':>12} rows")
    for pair in range(args.pairs):
        order = SIDES if pair % 2 == 0 else SIDES[::-1]
        for side in order:
            child_args = ["--child", side, "--rows", str(args.rows)]
            child_args += ["--batches", str(args.batches), "--epochs", str(args.epochs)]
            out = run_child(__file__, child_args, name=side)
            if args.json:
                print(json.dumps({"side": side, **out}))
                continue
            print(
                f"{side:<10} {out['held_mb']:>6.1f} MB {out['arrow_pool_mb']:>6.1f} MB "
                f"{out['rss_peak_mb']:>6.1f} MB {out['cpu_us_per_batch']:>6.1f} µs/batch "
                f"{out['rows']:,}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
