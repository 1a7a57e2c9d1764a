"""Validate sample orders against a 10-rule contract at 0 %, 2 % and 100 % rejects.

The rules cover every kind a contract states: required, pattern, uniqueness by key,
ranges, allowed values, lengths and a DuckDB SQL predicate. The batches are the sample
orders with their nested items and address, the Kafka locator, record id and raw key
and value bytes, i.e. what ``decode`` hands to ``validate``. Rejected rows cycle over
seven faults (a bad status, a missing total, a malformed id, a long currency, customer
0, a duplicate id, a negative total), so every DLQ message shape and both reasons occur.

Variants, each in its own process (so its peak RSS is its own), quarantine mode:

* ``validate``: the validator step (``Validator.run``: evaluation, DLQ rows with row
  JSON and messages, audit rows), batch by batch, on one core;
* ``flow``: the same through a real Bytewax flow (``run_main``) with ``twg.validate``;
* ``baseline``: a competent hand-written columnar step: the same checks written
  directly with ``pyarrow.compute`` (the SQL predicate in DuckDB), DLQ rows with the
  failed rule ids, messages built with ``binary_join_element_wise`` and the row JSON from
  DuckDB's ``to_json`` over the rejected rows, audit rows as columns.

Reported per variant and reject rate: rows/s (wall), CPU µs per record (user + system,
``resource.getrusage``; the system part, mostly page faults of fresh memory, also on
its own), rows per CPU second and peak RSS.

Run: python benchmarks/contract.py [--rows 1000000] [--batch 50000] [--rejects 0,2,100]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import peak_rss_mb, run_child  # noqa: E402

from thalweg_bytewax.contracts import ContractMode, Rule, RuleSet  # noqa: E402
from thalweg_bytewax.dev.samples import sample_orders  # noqa: E402
from thalweg_bytewax.records.metadata import MetadataColumns  # noqa: E402

COLS = MetadataColumns()
UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
STATUSES = ["PENDING", "PAID", "SHIPPED", "CANCELLED"]
SQL = "status = 'CANCELLED' OR total >= 0"
RULES = [
    Rule.not_null("order_id"),
    Rule.matches("order_id", UUID),
    Rule.unique("order_id"),
    Rule.ge("customer_id", 1),
    Rule.not_null("created_at"),
    Rule.one_of("status", STATUSES),
    Rule.length("currency", 3, 3),
    Rule.between("total", 0, 1_000_000),
    Rule.not_null("total"),
    Rule.sql("cancelled_or_positive", SQL),
]
ITEM = pa.struct(
    [("sku", pa.string()), ("quantity", pa.int32()), ("unit_price", pa.decimal128(12, 2))]
)
ADDRESS = pa.struct([("line1", pa.string()), ("city", pa.string()), ("country", pa.string())])
SCHEMA = pa.schema(
    [
        ("order_id", pa.string()),
        ("customer_id", pa.int64()),
        ("created_at", pa.timestamp("ms", tz="UTC")),
        ("status", pa.string()),
        ("currency", pa.string()),
        ("total", pa.decimal128(12, 2)),
        ("items", pa.list_(ITEM)),
        ("shipping_address", ADDRESS),
        ("coupon", pa.string()),
        (COLS.source_topic, pa.string()),
        (COLS.source_partition, pa.int32()),
        (COLS.source_offset, pa.int64()),
        (COLS.record_id, pa.binary(16)),
        (COLS.source_key, pa.binary()),
        (COLS.source_value, pa.binary()),
    ]
)


def _spoil(row: dict[str, Any], i: int, prev: dict[str, Any] | None) -> None:
    match i % 7:
        case 0:
            row["status"] = "LOST"
        case 1:
            row["total"] = None
        case 2:
            row["order_id"] = f"not-a-uuid-{i}"
        case 3:
            row["currency"] = "EURO"
        case 4:
            row["customer_id"] = 0
        case 5:
            row["order_id"] = prev["order_id"] if prev is not None else None
        case _:
            row["total"] = -row["total"] if row["total"] else row["total"]
            row["status"] = "PAID"


def make_batch(n: int, rejects: float) -> pa.RecordBatch:
    """``n`` sample orders, ``rejects`` percent of them spoiled (evenly spread)."""
    rows: list[dict[str, Any]] = []
    bad = 0
    for i, o in enumerate(sample_orders(n, seed=11)):
        row = {k: o[k] for k in SCHEMA.names if not k.startswith("_twg_")}
        if rejects and (i + 1) * rejects / 100 >= bad + 1:
            _spoil(row, bad, rows[-1] if rows else None)
            bad += 1
        row[COLS.source_topic] = "orders"
        row[COLS.source_partition] = 0
        row[COLS.source_offset] = i
        row[COLS.record_id] = i.to_bytes(16, "big")
        row[COLS.source_key] = str(o["customer_id"]).encode()
        row[COLS.source_value] = orjson.dumps(o, default=str)
        rows.append(row)
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)


# --- the competent hand-written baseline ----------------------------------------------

_IDS = [r.id for r in RULES]
_WORDS = [r.describe() for r in RULES]


def _mask(a: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(a.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def baseline_run(batch: pa.RecordBatch, con: Any) -> tuple[pa.RecordBatch | None, ...]:
    """The same 10 checks, DLQ rows and audit rows, written directly with Arrow/DuckDB."""
    n = batch.num_rows
    oid, total, status = batch["order_id"], batch["total"], batch["status"]
    idx = pa.table({"k": oid, "i": np.arange(n)})
    first = np.zeros(n, bool)
    first[idx.group_by("k").aggregate([("i", "min")])["i_min"].to_numpy()] = True
    lo, hi = pa.scalar(0, total.type), pa.scalar(1_000_000, total.type)
    con.register("b", batch)
    sql = _mask(con.sql(f"SELECT ({SQL}) IS FALSE FROM b").to_arrow_table().column(0))  # noqa: S608
    masks = np.stack(
        [
            _mask(oid.is_null()),
            _mask(pc.invert(pc.match_substring_regex(oid, UUID))),
            ~first & _mask(oid.is_valid()),
            _mask(pc.less(batch["customer_id"], 1)),
            _mask(batch["created_at"].is_null()),
            _mask(pc.invert(pc.is_in(status, value_set=pa.array(STATUSES)))),
            _mask(pc.not_equal(pc.utf8_length(batch["currency"]), 3)),
            _mask(pc.or_(pc.less(total, lo), pc.greater(total, hi))),
            _mask(total.is_null()),
            sql,
        ]
    )
    bad = masks.any(axis=0)
    rows, which = np.nonzero(masks.T)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(rows, minlength=n), out=offsets[1:])
    failed = pa.ListArray.from_arrays(pa.array(offsets), pa.array(_IDS).take(pa.array(which)))
    now = datetime.now(UTC)
    audit = pa.RecordBatch.from_arrays(
        [
            batch[COLS.record_id],
            batch[COLS.source_topic],
            batch[COLS.source_partition],
            batch[COLS.source_offset],
            pa.repeat(pa.scalar("bench"), n),
            pa.array(np.where(bad, "fail", "pass")),
            failed,
            pa.repeat(pa.scalar(now, pa.timestamp("us", tz="UTC")), n),
        ],
        names=["record_id", "topic", "partition", "offset", "step", "verdict", "rules", "at"],
    )
    if not bad.any():
        return batch, None, audit
    take = pa.array(np.flatnonzero(bad))
    sel = batch.take(take)
    locator = pc.binary_join_element_wise(
        sel[COLS.source_topic],
        pc.binary_join_element_wise(
            sel[COLS.source_partition].cast(pa.string()),
            sel[COLS.source_offset].cast(pa.string()),
            "@",
        ),
        ":",
    )
    words = pa.array(_WORDS).take(pa.array(np.argmax(masks[:, bad], axis=0)))
    rules = failed.take(take)
    message = pc.binary_join_element_wise(
        pc.binary_join_element_wise(locator, words, ": expected "),
        pc.binary_join(rules, ", "),
        "; failed rules: ",
    )
    payload = sel.select([c for c in sel.schema.names if not c.startswith("_twg_")])
    con.register("r", payload)
    row_json = con.sql("SELECT to_json(r)::VARCHAR FROM r").to_arrow_table().column(0)
    dlq = pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar("dq"), len(take)),
            rules,
            message,
            sel[COLS.source_topic],
            sel[COLS.source_partition],
            sel[COLS.source_offset],
            sel[COLS.record_id],
            sel[COLS.source_key],
            sel[COLS.source_value],
            row_json.combine_chunks(),
        ],
        names=["reason", "rules", "message", "topic", "partition", "offset", "id", "k", "v", "j"],
    )
    clean = batch.filter(pa.array(~bad))
    return clean, dlq, audit


# --- variants -------------------------------------------------------------------------


def _cpu() -> tuple[float, float]:
    """User and system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def _variant(name: str, rows: int, size: int, rejects: float) -> dict[str, float]:
    batch = make_batch(size, rejects)
    repeats = max(1, rows // size)
    total = repeats * size
    rejected = 0
    if name == "flow":
        import bytewax.operators as op
        from bytewax.dataflow import Dataflow
        from bytewax.testing import TestingSink, TestingSource, run_main

        import thalweg_bytewax.operators as twg

        flow = Dataflow("bench")
        inp = op.input("inp", flow, TestingSource([("orders:0", batch)] * repeats))
        out = twg.validate("validate", inp, None, mode="quarantine", rules=RULES)
        counted: list[int] = []
        op.output("clean", op.map("c", out.clean, lambda _: 0), TestingSink([]))
        op.output(
            "rejected", op.map("r", out.rejected, lambda kv: kv[1].num_rows), TestingSink(counted)
        )
        op.output("audit", op.map("a", out.audit, lambda _: 0), TestingSink([]))
        wall, start = time.perf_counter(), _cpu()
        run_main(flow)
        rejected = sum(counted)
    else:
        if name == "validate":
            from thalweg_bytewax.operators._validator import Validator

            validator = Validator("bench", RuleSet(RULES), ContractMode.QUARANTINE, COLS)

            def step(b: pa.RecordBatch) -> pa.RecordBatch | None:
                return validator.run(b).rejected
        else:
            import duckdb

            con = duckdb.connect()

            def step(b: pa.RecordBatch) -> pa.RecordBatch | None:
                return baseline_run(b, con)[1]

        step(batch)  # warm up (DuckDB connection, kernels)
        wall, start = time.perf_counter(), _cpu()
        for _ in range(repeats):
            out_dlq = step(batch)
            rejected += out_dlq.num_rows if out_dlq is not None else 0
    wall = time.perf_counter() - wall
    end = _cpu()
    cpu, system = end[0] + end[1] - start[0] - start[1], end[1] - start[1]
    return {
        "rows_per_s": total / wall,
        "cpu_us_per_record": 1e6 * cpu / total,
        "sys_us_per_record": 1e6 * system / total,
        "rejected": rejected / total,
        "peak_rss_mb": peak_rss_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=50_000)
    parser.add_argument("--rejects", default="0,2,100", help="reject percentages")
    parser.add_argument("--variant", default="validate,baseline,flow")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_variant(args.variant, args.rows, args.batch, float(args.rejects))))
        return
    print(f"rules: {len(RULES)}; batch: {args.batch} rows; {args.rows} rows per variant")
    print(
        f"{'variant':<9} {'rejects':>7} {'rows/s':>12} {'CPU µs/rec':>11} {'of it sys':>9}"
        f" {'rows/CPU s':>11} {'peak RSS':>9}"
        f" {'rejected':>8}"
    )
    for rejects in args.rejects.split(","):
        for name in args.variant.split(","):
            child = [
                *("--child", "--variant", name, "--rejects", rejects),
                *("--rows", str(args.rows), "--batch", str(args.batch)),
            ]
            r = run_child(__file__, child, name=name)
            print(
                f"{name:<9} {rejects + ' %':>7} {r['rows_per_s']:12,.0f}"
                f" {r['cpu_us_per_record']:11.3f} {r['sys_us_per_record']:9.3f}"
                f" {1e6 / r['cpu_us_per_record']:11,.0f} {r['peak_rss_mb']:7.0f} MB"
                f" {100 * r['rejected']:7.1f}%",
                flush=True,
            )


if __name__ == "__main__":
    main()
