"""SIGKILL flows writing rows without a source locator into the table sinks, resume them.

Two flows (``main`` below, run as ``python -m tests.recovery.test_unlocated_crash``):

* ``rows``: keyed batches without a locator from a ``TestingSource``, an epoch per batch,
  into a two-shard sink built with ``locators="absent"``; later batches update earlier
  keys. Killed at ``epoch_sink.after_commit`` (the table committed the epoch, the
  recovery store has not), the epoch replays on resume: an upsert by key holds each key
  once with its last value; an append holds every row, the replayed epoch's twice
  (at-least-once, as documented).
* ``windows``: ``twg.window_agg`` over the paced source of
  :mod:`tests.recovery.window_crash_flow`, its results upserted on (``status``,
  ``window_start``). After a kill at the same point and a resume, the table equals a
  batch recomputation of the input.
* ``late``: the same aggregation in a tumbling, sliding or session window, its late
  report upserted on (``status``, ``source``, ``late_seq``). Killed at several points in
  turn and resumed each time, the table holds every late record once.
"""

from __future__ import annotations

import sys
from collections import Counter
from datetime import timedelta
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig
from bytewax.testing import TestingSource, cluster_main

from tests.fixtures.crash import CrashableFlow, CrashHarness

pytestmark = pytest.mark.slow

BATCHES, PER_BATCH, STRIDE = 12, 10, 5  # half of each batch updates the one before
SHARDS = 2


def items() -> list[tuple[str, pa.RecordBatch]]:
    """Keyed batches without a locator; ``name`` says which batch wrote the row.

    Keyed by the upsert key's route (ids of one parity under one key), so each id reaches
    one shard, in order: batch ``b`` holds ten ids of parity ``b % 2``, five of them
    written by the previous batch of that parity.
    """
    out = []
    for b in range(BATCHES):
        group, rnd = b % SHARDS, b // SHARDS
        ids = [group + SHARDS * j for j in range(rnd * STRIDE, rnd * STRIDE + PER_BATCH)]
        out.append(
            (
                f"k{group}",
                pa.record_batch(
                    {
                        "id": pa.array(ids, pa.int64()),
                        "name": pa.array([f"b{b}-{i}" for i in ids], pa.string()),
                    }
                ),
            )
        )
    return out


def last_values() -> dict[int, str]:
    """Each id's last written name (the upsert's final view)."""
    view: dict[int, str] = {}
    for _, batch in items():
        view.update(
            zip(batch.column("id").to_pylist(), batch.column("name").to_pylist(), strict=True)
        )
    return view


def build_sink(target: str, where: str, schema: str, **options: Any) -> Any:
    """A sink for rows without a locator, on a Postgres schema or an Iceberg warehouse."""
    if target == "postgres":
        from thalweg_bytewax.connectors.postgres import PostgresSink

        return PostgresSink(where, "items", schema=schema, locators="absent", **options)
    from thalweg_bytewax.connectors.iceberg import IcebergSink

    if options.get("mode") == "upsert":
        options["shards"] = 1  # an upserting Iceberg table has one writer
    return IcebergSink(where, "test.items", locators="absent", **options)


def main() -> None:
    """``main FLOW TARGET MODE WHERE SCHEMA RECOVERY``: run to the end (or to a fault)."""
    kind, target, mode, where, schema, recovery = sys.argv[1:7]
    flow = Dataflow(f"unlocated_{kind}")
    if kind == "rows":
        up = op.input("in", flow, TestingSource(items()))
        keys = ["id"] if mode == "upsert" else []
        sink = build_sink(target, where, schema, mode=mode, key_columns=keys, shards=SHARDS)
        op.output("out", up, sink)
        epoch = timedelta(0)
    else:
        import thalweg_bytewax.operators as twg
        from tests.recovery.window_crash_flow import LATENESS, WINDOW, _Source
        from thalweg_bytewax.windows.aggregate import WindowSpec

        windows: dict[str, WindowSpec] = {
            "tumbling": twg.Tumbling(WINDOW),
            "sliding": twg.Sliding(2 * WINDOW, WINDOW),
            "session": twg.Session(WINDOW),
        }
        out = twg.window_agg(
            "revenue",
            op.input("orders", flow, _Source()),
            window=windows.get(mode, twg.Tumbling(WINDOW)),
            aggs={"revenue": ("sum", "amount"), "orders": ("count", "*")},
            group_by=["status"],
            time_column="created_at",
            allowed_lateness=LATENESS,
        )
        if kind == "late":
            keys = ["status", "source", "late_seq"]
            sink = build_sink(target, where, schema, mode="upsert", key_columns=keys, shards=1)
            op.output("out", out.late, sink)
        else:
            keys = ["status", "window_start"]
            sink = build_sink(target, where, schema, mode="upsert", key_columns=keys, shards=SHARDS)
            op.output("out", out.windows, sink)
        epoch = timedelta(milliseconds=300)
    cluster_main(
        flow,
        addresses=[],
        proc_id=0,
        epoch_interval=epoch,
        recovery_config=RecoveryConfig(recovery),
        worker_count_per_proc=1,
    )


def unlocated_flow(crash: CrashHarness, args: list[str]) -> CrashableFlow:
    """This module run as a flow (``main``) with ``args``."""
    return crash.command([sys.executable, "-m", "tests.recovery.test_unlocated_crash", *args], timeout_s=180)


def read_back(kind: str, target: str, where: str, schema: str) -> pa.Table:
    """The target table as Arrow (empty when it does not exist yet)."""
    if target == "postgres":
        import psycopg

        from tests.connectors.postgres.postgres_helpers import read_table

        with psycopg.connect(where, autocommit=True) as conn:
            found = conn.execute("SELECT to_regclass(%s)", (f'"{schema}"."items"',)).fetchone()
        if found is None or found[0] is None:
            return pa.table({})
        order = "id" if kind == "rows" else "window_start"
        return read_table(where, schema, "items", order_by=order)
    from tests.fixtures.iceberg import read_iceberg
    from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig

    return read_iceberg(IcebergCatalogConfig(warehouse=where), "test.items")


def crash_and_resume(
    crash: CrashHarness, request: pytest.FixtureRequest, kind: str, target: str, mode: str, fault: str
) -> tuple[pa.Table, pa.Table, str, str]:
    """Run a flow to ``fault`` (SIGKILL), read the table, resume it, read it again."""
    if target == "postgres":
        where: str = request.getfixturevalue("pg_dsn")
        schema: str = request.getfixturevalue("pg_schema")
    else:
        where, schema = str(crash.root / "warehouse"), "-"
    flow = unlocated_flow(crash, [kind, target, mode, where, schema, str(crash.init_recovery())])
    flow.killed_at(fault)
    before = read_back(kind, target, where, schema)
    flow.finishes()
    return before, read_back(kind, target, where, schema), where, schema


@pytest.mark.parametrize("target", ["postgres", "iceberg"])
def test_an_unlocated_upsert_replayed_after_the_commit_holds_each_key_once(
    crash: CrashHarness, request: pytest.FixtureRequest, target: str
) -> None:
    before, after, _, _ = crash_and_resume(
        crash, request, "rows", target, "upsert", "epoch_sink.after_commit:4"
    )
    assert 0 < before.num_rows < len(last_values()), "the kill should fall mid-stream"
    got = dict(zip(after.column("id").to_pylist(), after.column("name").to_pylist(), strict=True))
    assert after.num_rows == len(got), "a key landed twice"
    assert got == last_values()


@pytest.mark.parametrize("target", ["postgres", "iceberg"])
def test_an_unlocated_append_replayed_after_the_commit_is_at_least_once(
    crash: CrashHarness, request: pytest.FixtureRequest, target: str
) -> None:
    before, after, _, _ = crash_and_resume(
        crash, request, "rows", target, "append", "epoch_sink.after_commit:4"
    )
    sent = Counter(n for _, b in items() for n in b.column("name").to_pylist())
    assert 0 < before.num_rows < sum(sent.values()), "the kill should fall mid-stream"
    got = Counter(after.column("name").to_pylist())
    assert set(got) == set(sent), "a row was lost"
    twice = {n for n, c in got.items() if c > 1}
    assert all(c <= 2 for c in got.values())  # noqa: PLR2004 - at most the one replayed epoch
    # The replayed epoch is the one committed when the kill fell: one batch's rows.
    assert len(twice) == PER_BATCH, f"expected one epoch replayed; got {len(twice)} rows twice"


@pytest.mark.parametrize("target", ["postgres", "iceberg"])
def test_window_results_upserted_after_a_kill_and_resume_equal_a_batch_recomputation(
    crash: CrashHarness, request: pytest.FixtureRequest, target: str
) -> None:
    from tests.recovery.test_window_crash import expected

    before, after, _, _ = crash_and_resume(
        crash, request, "windows", target, "upsert", "epoch_sink.after_commit:3"
    )
    want, _ = expected()
    assert 0 < before.num_rows < len(want), "the kill should fall mid-stream"
    rows = after.select(["status", "window_start", "revenue", "orders"]).to_pylist()
    got = {(r["status"], r["window_start"].isoformat()): (r["revenue"], r["orders"]) for r in rows}
    assert len(rows) == len(got), "a window landed twice"
    assert got == want


LATE_KILLS = [
    "epoch_sink.after_commit:2",
    "epoch_sink.before_commit:2",
    "epoch_sink.after_commit:3",
]
"""Where the late-report flow is killed, in turn: each run resumes the one before."""


def late_records() -> set[tuple[str, str, str]]:
    """Each late record of the paced source: (source partition, status, event time)."""
    from tests.recovery.window_crash_flow import PARTITIONS, batches

    late = set()
    for p in range(PARTITIONS):
        for batch, n_late in batches(p):
            for r in batch.slice(0, n_late).to_pylist():  # the late record comes first
                late.add((f"orders:{p}", r["status"], r["created_at"].isoformat()))
    return late


@pytest.mark.parametrize("window", ["tumbling", "sliding", "session"])
def test_late_records_upserted_after_kills_and_resumes_land_once_each(
    crash: CrashHarness, window: str
) -> None:
    where = str(crash.root / "warehouse")
    flow = unlocated_flow(crash, ["late", "iceberg", window, where, "-", str(crash.init_recovery())])
    want = late_records()
    held_after: list[int] = []
    for fault in LATE_KILLS:
        flow.killed_at(fault)
        held = read_back("late", "iceberg", where, "-")
        held_after.append(held.num_rows)
        if held.num_rows:
            keys = held.select(["status", "source", "late_seq"]).to_pylist()
            assert len(keys) == len({tuple(k.values()) for k in keys}), "a late row twice"
    assert 0 < held_after[0] < len(want), "the first kill should fall between late records"
    flow.finishes()
    got = read_back("late", "iceberg", where, "-").to_pylist()
    seen = Counter((r["source"], r["status"], r["event_time_min"].isoformat()) for r in got)
    assert set(seen) == want
    assert all(n == 1 for n in seen.values()), {k: n for k, n in seen.items() if n > 1}
    assert sum(r["late_records"] for r in got) == len(want)


if __name__ == "__main__":
    main()
