"""Validate sample orders against 10 rules in quarantine mode: rows/s and peak RSS.

Baseline in the same run: the same 10 rules evaluated per row in plain Python over the
same records as dicts. Three measurements:

* ``columnar``: the validator step alone (``_Validator.run``: evaluation, DLQ rows,
  audit rows), batch by batch, on one core;
* ``flow``: the same through a real Bytewax flow (``run_main``) with ``twg.validate``;
* ``per-row python``: a dict-per-record loop applying the same checks (on ready dicts,
  and from the Arrow batch including ``to_pylist``, which is what a flow would pay).

Run: python benchmarks/contract.py [--rows 1000000] [--batch 50000]
"""

from __future__ import annotations

import argparse
import re
import resource
import time
from decimal import Decimal

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource, run_main

import thalweg_bytewax.operators as twg
from thalweg_bytewax.contracts import ContractMode, Rule, RuleSet
from thalweg_bytewax.metadata import MetadataColumns
from thalweg_bytewax.operators.validation import _Validator
from thalweg_bytewax.samples import sample_orders

COLS = MetadataColumns()
UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
STATUSES = ["PENDING", "PAID", "SHIPPED", "CANCELLED"]
RULES = [
    Rule.not_null("order_id"),
    Rule.matches("order_id", UUID),
    Rule.ge("customer_id", 1),
    Rule.not_null("created_at"),
    Rule.one_of("status", STATUSES),
    Rule.length("currency", 3, 3),
    Rule.between("total", 0, 1_000_000),
    Rule.not_null("total"),
    Rule.length("coupon", None, 32),
    Rule.sql("cancelled_or_positive", "status = 'CANCELLED' OR total >= 0"),
]
SCHEMA = pa.schema(
    [
        ("order_id", pa.string()),
        ("customer_id", pa.int64()),
        ("created_at", pa.timestamp("ms", tz="UTC")),
        ("status", pa.string()),
        ("currency", pa.string()),
        ("total", pa.decimal128(12, 2)),
        ("coupon", pa.string()),
        (COLS.source_topic, pa.string()),
        (COLS.source_partition, pa.int32()),
        (COLS.source_offset, pa.int64()),
        (COLS.record_id, pa.binary(16)),
    ]
)


def make_rows(n: int) -> list[dict]:
    rows = []
    for i, o in enumerate(sample_orders(n, seed=11)):
        row = {k: o[k] for k in SCHEMA.names if not k.startswith("_twg_")}
        if i % 100 == 7:  # 1% bad rows, a mix of dq and contract failures
            row["status"] = "LOST"
        if i % 100 == 57:
            row["total"] = None
        row[COLS.source_topic] = "orders"
        row[COLS.source_partition] = 0
        row[COLS.source_offset] = i
        row[COLS.record_id] = i.to_bytes(16, "big")
        rows.append(row)
    return rows


def per_row_python(rows: list[dict]) -> int:
    uuid = re.compile(UUID)
    statuses = set(STATUSES)
    bad = 0
    for r in rows:
        failed = []
        if r["order_id"] is None:
            failed.append("order_id_not_null")
        elif not uuid.search(r["order_id"]):
            failed.append("order_id_pattern")
        if r["customer_id"] is not None and r["customer_id"] < 1:
            failed.append("customer_id_range")
        if r["created_at"] is None:
            failed.append("created_at_not_null")
        if r["status"] is not None and r["status"] not in statuses:
            failed.append("status_allowed_values")
        if r["currency"] is not None and len(r["currency"]) != 3:
            failed.append("currency_length")
        t = r["total"]
        if t is None:
            failed.append("total_not_null")
        elif not (Decimal(0) <= t <= Decimal(1_000_000)):
            failed.append("total_range")
        if r["coupon"] is not None and len(r["coupon"]) > 32:
            failed.append("coupon_length")
        if t is not None and not (r["status"] == "CANCELLED" or t >= 0):
            failed.append("cancelled_or_positive")
        bad += bool(failed)
    return bad


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=50_000)
    args = parser.parse_args()
    rows = make_rows(args.batch)
    batch = pa.RecordBatch.from_pylist(rows, schema=SCHEMA)
    repeats = max(1, args.rows // args.batch)
    total = repeats * args.batch
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    ruleset = RuleSet(RULES)
    validator = _Validator("bench", ruleset, ContractMode.QUARANTINE, COLS)
    validator.run(batch)  # warm up (DuckDB connection, kernels)
    t = time.perf_counter()
    rejected = 0
    for _ in range(repeats):
        verdict = validator.run(batch)
        rejected += verdict.rejected.num_rows if verdict.rejected is not None else 0
    columnar = total / (time.perf_counter() - t)

    flow = Dataflow("bench")
    inp = op.input("inp", flow, TestingSource([("orders:0", batch)] * repeats))
    out = twg.validate("validate", inp, None, mode="quarantine", rules=RULES)
    sink: list = []
    op.output("clean", out.clean, TestingSink(sink))
    op.output("rejected", out.rejected, TestingSink(sink))
    op.output("audit", out.audit, TestingSink(sink))
    t = time.perf_counter()
    run_main(flow)
    in_flow = total / (time.perf_counter() - t)
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    t = time.perf_counter()
    bad = 0
    for _ in range(max(1, repeats // 10)):
        bad = per_row_python(rows)
    python = max(1, repeats // 10) * args.batch / (time.perf_counter() - t)

    t = time.perf_counter()
    for _ in range(max(1, repeats // 10)):
        per_row_python(batch.to_pylist())
    python_arrow = max(1, repeats // 10) * args.batch / (time.perf_counter() - t)

    print(f"rules: {len(RULES)}; batch: {args.batch} rows; total: {total} rows")
    print(f"rejected per batch: {rejected // repeats} (per-row python agrees: {bad})")
    print(f"columnar validator : {columnar:12,.0f} rows/s")
    print(f"bytewax flow       : {in_flow:12,.0f} rows/s")
    print(f"per-row python     : {python:12,.0f} rows/s")
    print(f"per-row python, from the Arrow batch (to_pylist): {python_arrow:12,.0f} rows/s")
    print(
        f"speed-up (columnar / python): {columnar / python:.1f}x; "
        f"vs from Arrow: {columnar / python_arrow:.1f}x"
    )
    print(f"peak RSS: {rss_peak / 1024:.0f} MiB (before validation: {rss_before / 1024:.0f} MiB)")


if __name__ == "__main__":
    main()
