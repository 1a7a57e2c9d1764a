"""``thalweg recover``: a sink that fell behind catches up from the raw lane, Kafka unread.

The orders flow reads a real Kafka topic (the librdkafka mock cluster) into its raw
lane, its Iceberg ``orders`` table, DLQ and audit, the raw lane and the table recording
their coverage beside the raw lane:

1. the flow is SIGKILLed mid-run (``coverage.after_record``): the orders sink fails;
2. ingest goes on without the orders sink (its target is down), so the raw lane, DLQ
   and audit reach the topic's end and the orders lane's coverage shows the gap —
   exactly the offsets its files lack;
3. ``thalweg recover flows.orders --sink ice_orders`` runs with the brokers pointed at
   a closed port (Kafka is never read) and is SIGKILLed itself mid-way;
4. run again, it completes: the orders table holds every clean record exactly once (the
   raw lane's records minus the DLQ's) and its coverage equals the raw lane's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.fixtures.crash import CrashableFlow, CrashHarness
from tests.helpers import closed_port
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.coverage.report import coverage_report
from thalweg_bytewax.coverage.store import SqliteCoverageStore
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.testing import produce_sample_orders

COLS = MetadataColumns()
ORDERS, RAW = "orders.ice_orders", "orders.raw_lane"
TIMEOUT_S = 240
"""How long one run of the flow or of ``thalweg recover`` may take (2,400 orders)."""


def orders_table(data: Path) -> pa.Table:
    """The flow's Iceberg `orders` table under `data` (no columns when never created)."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig

    catalog = IcebergCatalogConfig(warehouse=str(data / "warehouse")).load()
    try:
        return catalog.load_table("sales.orders").scan().to_arrow()
    except (NoSuchTableError, NoSuchNamespaceError):
        return pa.table({})


def offsets(lane: Path | pa.Table) -> dict[tuple[str, int], list[int]]:
    """Every row's offset per (topic, partition), duplicates kept."""
    if isinstance(lane, Path) and not lane.exists():
        return {}
    names = [COLS.source_topic, COLS.source_partition, COLS.source_offset]
    table = read_lane(lane, names) if isinstance(lane, Path) else lane
    if table.num_columns == 0:
        return {}
    out: dict[tuple[str, int], list[int]] = {}
    for t, p, o in zip(*(table.column(n).to_pylist() for n in names), strict=True):
        out.setdefault((t, p), []).append(o)
    return out


@pytest.mark.slow
def test_recover_restores_parity_from_the_raw_lane_without_kafka_and_survives_its_own_kill(
    crash: CrashHarness, kafka_bootstrap: str, make_topic: Callable[[], str]
) -> None:
    topic = make_topic()
    produce_sample_orders(kafka_bootstrap, topic, 2_400)
    data = crash.root / "data"

    def settings(bootstrap: str) -> dict[str, str]:
        return {
            "THALWEG_DATA_DIR": str(data),
            "THALWEG_TOPIC": topic,
            "THALWEG_BOOTSTRAP_SERVERS": bootstrap,
        }

    def live(recovery: str, *extra: str) -> CrashableFlow:
        store = crash.init_recovery(path=crash.root / recovery)
        argv = ["tests.recovery.recover_orders_flow", str(data), kafka_bootstrap, topic]
        argv += [str(store), *extra]
        return crash.command([sys.executable, "-m", *argv], settings("x:1"), TIMEOUT_S)

    # 1. Mid-run, the process dies right after a sink recorded an epoch.
    live("rec1").killed_at("coverage.after_record:7")
    # 2. Ingest goes on without the orders sink.
    live("rec2", "--without-orders").finishes()

    store = SqliteCoverageStore(data / "raw")
    raw = offsets(data / "raw")
    rejected = offsets(data / "dlq")
    assert sum(map(len, raw.values())) == 2_400
    landed = offsets(orders_table(data))
    claimed = {(e.topic, e.partition): e.coverage for e in store.entries(ORDERS)}
    gap: dict[tuple[str, int], int] = {}
    for key, held in raw.items():
        mine = claimed.get(key, OffsetCoverage())
        rows = set(landed.get(key, []))
        assert all(mine.covers(o) for o in rows), f"{key}: a landed row is not covered"
        extra = {o for lo, hi in mine.spans for o in range(lo, hi + 1)} - rows
        assert extra <= set(rejected.get(key, [])), f"{key}: claims offsets it does not hold"
        gap[key] = sum(1 for o in held if not mine.covers(o))
    assert sum(gap.values()) > 0, "the orders sink should have fallen behind"
    # `thalweg coverage` shows exactly that gap, partitions the sink never recorded included.
    report = coverage_report(store, sink=ORDERS, raw_lane=RAW)
    assert {(r["topic"], r["partition"]): r["behind_raw"] for r in report} == gap

    # 3. Recover with the brokers unreachable, killed mid-way by its own sink's commit.
    dead = f"127.0.0.1:{closed_port()}"
    cli = [sys.executable, "-m", "thalweg_bytewax.cli", "recover", "flows.orders"]
    cli += ["--sink", "ice_orders", "--epoch-s", "0", "--batch-size", "40", "--no-progress"]
    recover = crash.command(cli, settings(dead), TIMEOUT_S)
    recover.killed_at("coverage.after_record:3")
    partial = offsets(orders_table(data))
    assert sum(map(len, partial.values())) > sum(map(len, landed.values()))

    # 4. Rerun: parity, no duplicates, Kafka never read.
    done = recover.finishes()
    assert "recovered" in done.stdout
    assert "Connection refused" not in done.stderr, "recover must not reach for Kafka"
    final = offsets(orders_table(data))
    for key, held in raw.items():
        got = final.get(key, [])
        assert len(got) == len(set(got)), f"{key}: duplicates after recovery"
        assert set(got) == set(held) - set(rejected.get(key, [])), key
    report = coverage_report(store, sink=ORDERS, raw_lane=RAW)
    assert {(r["topic"], r["partition"]): r["behind_raw"] for r in report} == dict.fromkeys(raw, 0)
    # Nothing left: a third run replays nothing.
    again = recover.finishes()
    assert "nothing to recover" in again.stdout
    # The table's rows pass the contract, as the live path writes them.
    table = orders_table(data)
    assert pc.all(pc.is_valid(table[COLS.record_id])).as_py()
