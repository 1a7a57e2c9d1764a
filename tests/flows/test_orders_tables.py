"""flows.orders lands its three tables: Iceberg by default, PostgreSQL with a DSN.

The counts come from the sample's own derivation: ``orders`` holds every clean decoded
order, ``order_lines`` one row per element of their ``items``, and
``revenue_per_status_minute`` one row per distinct (status, minute of ``created_at``),
with the revenue and order count of that minute. The docstring's drawing names exactly
the steps the flow builds.
"""

from __future__ import annotations

import re
import sys
from collections import Counter, defaultdict
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from bytewax.testing import run_main

from flows.orders import OrdersSettings, build_flow
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig
from thalweg_bytewax.connectors.raw_lane import lane_held_offsets
from thalweg_bytewax.coverage.recovery_plan import plan_recovery
from thalweg_bytewax.coverage.store import SqliteCoverageStore
from thalweg_bytewax.dev._orders_sample import _bad_payload, sample_order_at
from thalweg_bytewax.dev.samples import encode_order_avro
from thalweg_bytewax.records.metadata import MetadataColumns

COLS = MetadataColumns()
N = 3_000


def clean_orders(n: int) -> list[dict]:
    """The sample orders that decode and meet the contract (every 1000th from 250/500 not)."""
    out = []
    for i in range(n):
        order = sample_order_at(7, i)
        if i % 1000 == 250 or _bad_payload(i, encode_order_avro(order)) is None:
            continue
        if i % 1000 == 500:
            continue
        out.append(order)
    return out


def expected_revenue(orders: list[dict]) -> dict[tuple[str, datetime], tuple[Decimal, int]]:
    sums: dict[tuple[str, datetime], list] = defaultdict(lambda: [Decimal("0.00"), 0])
    for o in orders:
        minute = o["created_at"].replace(second=0, microsecond=0)
        sums[(o["status"], minute)][0] += o["total"]  # EUR: amount_eur == total
        sums[(o["status"], minute)][1] += 1
    return {k: (v[0], v[1]) for k, v in sums.items()}


def check_tables(orders: pa.Table, lines: pa.Table, revenue: pa.Table) -> None:
    want = clean_orders(N)
    assert orders.num_rows == len(want) == N - 6
    assert sorted(orders["order_id"].to_pylist()) == sorted(o["order_id"] for o in want)
    assert lines.num_rows == sum(len(o["items"]) for o in want)
    # Each line keeps its order's locator; (partition, offset, ordinal) is unique.
    keys = set(
        zip(
            lines[COLS.source_partition].to_pylist(),
            lines[COLS.source_offset].to_pylist(),
            lines["_twg_derived_ordinal"].to_pylist(),
            strict=True,
        )
    )
    assert len(keys) == lines.num_rows
    per_order = Counter(lines["order_id"].to_pylist())
    assert per_order == Counter({o["order_id"]: len(o["items"]) for o in want})
    windows = expected_revenue(want)
    assert revenue.num_rows == len(windows)
    got = {
        (r["status"], r["window_start"]): (r["revenue_eur"], r["orders"])
        for r in revenue.to_pylist()
    }
    assert got == windows


def iceberg(settings: OrdersSettings, table: str) -> pa.Table:
    catalog = IcebergCatalogConfig(warehouse=str(settings.warehouse)).load()
    return catalog.load_table(f"sales.{table}").scan().to_arrow()


@pytest.mark.heavy
def test_the_sample_lands_three_iceberg_tables(tmp_path: Path) -> None:
    settings = OrdersSettings(data_dir=tmp_path, sample_orders=N)
    run_main(build_flow(settings))
    check_tables(
        iceberg(settings, "orders"),
        iceberg(settings, "order_lines"),
        iceberg(settings, "revenue_per_status_minute"),
    )
    # Run it again: the located tables skip the replay, the windows upsert the same keys.
    run_main(build_flow(settings))
    check_tables(
        iceberg(settings, "orders"),
        iceberg(settings, "order_lines"),
        iceberg(settings, "revenue_per_status_minute"),
    )


@pytest.mark.heavy
@pytest.mark.postgres
def test_with_a_dsn_the_same_tables_land_in_postgres(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    import psycopg
    from psycopg import sql

    settings = OrdersSettings.load(
        {
            "THALWEG_DATA_DIR": str(tmp_path),
            "THALWEG_SAMPLE_ORDERS": str(N),
            "THALWEG_POSTGRES_DSN": pg_dsn,
            "THALWEG_POSTGRES_SCHEMA": pg_schema,
        }
    )
    run_main(build_flow(settings))

    def read(table: str) -> pa.Table:
        with psycopg.connect(pg_dsn) as conn:
            cur = conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(pg_schema, table)))
            names = [d.name for d in cur.description or ()]
            return pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in cur.fetchall()])

    check_tables(read("orders"), read("order_lines"), read("revenue_per_status_minute"))
    check_tables(
        iceberg(settings, "orders"),
        iceberg(settings, "order_lines"),
        iceberg(settings, "revenue_per_status_minute"),
    )
    # The PostgreSQL tables record into the flow-wide store as the Iceberg ones do, so
    # `thalweg coverage` and `thalweg recover` see them; the DLQ lanes (rejects only)
    # and the windowed tables (no locator) record nothing that could look like lag.
    entries = SqliteCoverageStore(settings.raw_lane).entries()
    by_sink: dict[str, dict[tuple[str, int], list[list[int]]]] = defaultdict(dict)
    for e in entries:
        by_sink[e.sink][(e.topic, e.partition)] = e.coverage.to_list()
    assert set(by_sink) == {
        "orders.raw_lane",
        "orders.ice_orders",
        "orders.ice_lines",
        "orders.pg_orders",
        "orders.pg_lines",
    }
    assert by_sink["orders.pg_orders"] == by_sink["orders.ice_orders"] == by_sink["orders.raw_lane"]
    assert by_sink["orders.pg_lines"] == by_sink["orders.ice_lines"]
    # So `thalweg recover --sink pg_orders` has nothing to replay, not the whole lane.
    plan = plan_recovery(
        SqliteCoverageStore(settings.raw_lane),
        "orders.pg_orders",
        raw_lane="orders.raw_lane",
        held=lane_held_offsets(settings.raw_lane),
    )
    assert plan.missing == {}


def drawn_steps() -> set[str]:
    """The step names the module docstring's drawing shows."""
    doc = sys.modules["thalweg_bytewax.flows.orders"].__doc__ or ""
    drawing = doc.split("(the summary steps aside)::", 1)[1].split("\n\n", 2)[1]
    return set(re.findall(r"[a-z_]+", drawing))


def built_steps(settings: OrdersSettings) -> set[str]:
    flow = build_flow(settings, summary=True)
    names = {step.step_id.split(".", 1)[1] for step in flow.substeps}
    return {n for n in names if not n.startswith("summary_")}


def test_the_docstring_drawing_shows_exactly_the_steps_the_flow_builds(tmp_path: Path) -> None:
    with_pg = OrdersSettings.load(
        {"THALWEG_DATA_DIR": str(tmp_path), "THALWEG_POSTGRES_DSN": "postgresql://u@h/db"}
    )
    assert drawn_steps() == built_steps(with_pg)
    without = OrdersSettings(data_dir=tmp_path)
    assert built_steps(without) == {s for s in drawn_steps() if not s.startswith("pg_")}
    assert not tmp_path.exists() or not any(tmp_path.iterdir()), "building wrote something"
