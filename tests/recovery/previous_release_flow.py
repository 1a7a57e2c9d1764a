"""The flow whose recovery store, lanes and tables ``tests/data/previous_release`` holds.

An orders-shaped flow on local components only, built from public names alone
(``thalweg_bytewax.connectors.*``, ``thalweg_bytewax.operators``), so that the same
module builds it before and after the package's modules move::

    orders_in (FileSource, input/orders.csv) ─┬─ raw_lane (ParquetSink, coverage)
                                               └─ split ─┬─ dlq (ParquetSink)
                                                         └─ dedup (natural key)
                                                            └─ contract (validate)
        ┌───────────────────────────────────────────────────┘   ├─ dlq (rejects)
        ├─ ice_orders (IcebergSink, append, coverage)
        ├─ ipc_orders (ArrowIPCSink, coverage)
        └─ revenue (window_agg) ─┬─ ice_revenue (IcebergSink, upsert)
                                 └─ ice_late (IcebergSink, upsert)
    ipc_in (ArrowIPCSource, ipc_in/) ─ ipc_copy (ParquetSink, coverage)

Everything lives under one root directory (see :func:`layout`). The file source names
its files, and the Iceberg catalog its data files, by absolute path, so a store only
resumes at the path it was written at: the fixture is written at :data:`ROOT` and the
test copies it back there.
"""

from __future__ import annotations

import fcntl
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow

import thalweg_bytewax.operators as twg
from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSink, ArrowIPCSource
from thalweg_bytewax.connectors.files import FileSource, split_rejects
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig, IcebergSink
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.contracts import load_contract

ROOT = Path("/tmp/thalweg-previous-release/root")
"""Where the fixture was written and where a resume must run (absolute paths inside)."""
NAMESPACE = "prev"
"""The Iceberg namespace of the flow's tables."""
T0 = datetime(2026, 1, 1, tzinfo=UTC)
"""The first order's event time; order ``i`` is ``T0 + 10 s * i``."""
PART_ONE = range(36)
"""The orders of the first run: event times in minutes 0 to 5."""
PART_TWO = range(36, 72)
"""The orders of the resumed run: event times in minutes 6 to 11."""
BAD_AMOUNT = 7
"""A first-run order whose amount breaks the contract (a DLQ row)."""
REPLAYED = 3
"""A first-run order sent again in the second part: dedup must drop it."""
REUSED_PAYMENT = 5
"""A first-run order whose payment reference a new order reuses: the contract's
windowed ``unique`` rule must reject the new one."""
LATE_AT = T0 + timedelta(seconds=15)
"""A second-part order's event time in minute 0, whose window the first run closed."""
REUSING_ORDER = "o9001"
"""The second-part order that reuses :data:`REUSED_PAYMENT`'s payment reference."""
LATE_ORDER = "o9002"
"""The second-part order at :data:`LATE_AT`."""
IPC_ROWS = (range(10), range(10, 20))
"""The offsets of the two Arrow IPC input files (first run, second run)."""
FOREVER = timedelta(days=36_500)
"""Dedup's and the ``unique`` rule's window: their clock is the processing time, and the
resume runs long after the fixture was written."""
ITEM_SCHEMA = pa.schema([pa.field("item", pa.string(), nullable=False)])
"""The rows ``to_batches`` gathers from the Arrow IPC input."""
CSV_HEADER = "order_id,payment_ref,status,amount,created_at\n"
STATUSES = ("new", "paid", "shipped")


@dataclass(frozen=True)
class Layout:
    """The files of one flow root."""

    root: Path

    @property
    def contract(self) -> Path:
        """The ODCS contract the flow validates with."""
        return self.root / "orders.odcs.yaml"

    @property
    def csv(self) -> Path:
        """The file source's one file (it grows between the runs)."""
        return self.root / "input" / "orders.csv"

    @property
    def ipc_in(self) -> Path:
        """The Arrow IPC source's directory (a file is added between the runs)."""
        return self.root / "ipc_in"

    @property
    def recovery(self) -> Path:
        """The Bytewax recovery directory (one partition)."""
        return self.root / "recovery"

    @property
    def lake(self) -> Path:
        """Lanes, the coverage store (in ``raw``) and the Iceberg warehouse."""
        return self.root / "lake"


def layout(root: Path = ROOT) -> Layout:
    """The files under ``root``."""
    return Layout(root)


@contextmanager
def root_lock() -> Iterator[None]:
    """Hold the fixed root for this process: runs in other processes wait their turn."""
    ROOT.parent.mkdir(parents=True, exist_ok=True)
    with (ROOT.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def order_row(i: int) -> str:
    """Order ``i`` as a CSV line."""
    amount = -1.0 if i == BAD_AMOUNT else round(10 + 1.25 * i, 2)
    at = (T0 + timedelta(seconds=10 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"o{i:04d},p{i:04d},{STATUSES[i % 3]},{amount},{at}\n"


def part_one_csv() -> str:
    """The CSV file of the first run."""
    return CSV_HEADER + "".join(order_row(i) for i in PART_ONE)


def part_two_csv() -> str:
    """The lines appended for the resumed run: new orders, a replay, a reuse, a late one."""
    lines = [order_row(i) for i in PART_TWO]
    lines.insert(5, order_row(REPLAYED))
    at = (T0 + timedelta(seconds=10 * PART_TWO[10])).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines.insert(12, f"{REUSING_ORDER},p{REUSED_PAYMENT:04d},paid,99.5,{at}\n")
    # First, so that only the restored watermark makes it late (a fresh one would not).
    lines.insert(0, f"{LATE_ORDER},p9002,new,12.5,{LATE_AT.strftime('%Y-%m-%dT%H:%M:%SZ')}\n")
    return "".join(lines)


def ipc_batch(offsets: range) -> pa.Table:
    """Rows of the Arrow IPC input at ``offsets``: a payload and their source locator."""
    n = len(offsets)
    return pa.table(
        {
            "item": pa.array([f"item-{o}" for o in offsets]),
            "_twg_source_topic": pa.array(["items"] * n),
            "_twg_source_partition": pa.array([0] * n, pa.int32()),
            "_twg_source_offset": pa.array(list(offsets), pa.int64()),
        }
    )


def ipc_file(where: Layout, offsets: range) -> Path:
    """Where the IPC input file of ``offsets`` goes (named by its offsets)."""
    return where.ipc_in / "items" / "0" / f"{offsets[0]}-{offsets[-1]}.arrow"


def write_ipc(path: Path, table: pa.Table) -> None:
    """Write ``table`` as an Arrow IPC file (two record batches)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, table.schema) as writer:
        writer.write_table(table, max_chunksize=max(1, table.num_rows // 2))


def build_flow(where: Layout) -> Dataflow:
    """The dataflow over the files of ``where``."""
    contract = load_contract(str(where.contract))
    lake = where.lake
    raw_lane = lake / "raw"
    catalog = IcebergCatalogConfig(warehouse=str(lake / "warehouse"))

    flow = Dataflow("previous_release")
    raw = op.input("orders_in", flow, FileSource(str(where.csv), schema=contract, batch_rows=8))
    op.output("raw_lane", raw, ParquetSink(raw_lane, shards=2, coverage_store=raw_lane))
    split = split_rejects("split", raw)
    unique = twg.dedup("dedup", split.ok, by="natural_key", window=FOREVER, contract=contract)
    checked = twg.validate(
        "contract",
        unique,
        contract,
        mode="quarantine",
        rules=[
            twg.Rule.between("amount", 0, 10_000),
            twg.Rule.unique("payment_ref", window=FOREVER),
        ],
    )
    rejects = op.merge("rejects", split.rejected, checked.rejected)
    op.output("dlq", rejects, ParquetSink(lake / "dlq", shards=2))
    clean = checked.clean
    orders = IcebergSink(catalog, f"{NAMESPACE}.orders", shards=2, coverage_store=raw_lane)
    op.output("ice_orders", clean, orders)
    op.output("ipc_orders", clean, ArrowIPCSink(lake / "ipc", shards=2, coverage_store=raw_lane))
    revenue = twg.window_agg(
        "revenue",
        clean,
        window=twg.Tumbling(timedelta(minutes=1)),
        aggs={"revenue": ("sum", "amount"), "orders": ("count", "*")},
        group_by=["status"],
        time_column="created_at",
    )
    upsert_windows = IcebergSink(
        catalog,
        f"{NAMESPACE}.revenue",
        mode="upsert",
        key_columns=["status", "window_start"],
        locators="absent",
        shards=1,
    )
    op.output("ice_revenue", revenue.windows, upsert_windows)
    upsert_late = IcebergSink(
        catalog,
        f"{NAMESPACE}.late",
        mode="upsert",
        key_columns=["status", "source", "late_seq"],
        locators="absent",
        shards=1,
    )
    op.output("ice_late", revenue.late, upsert_late)

    items = op.input("items_in", flow, ArrowIPCSource(str(where.ipc_in)))
    op.output("ipc_copy", items, ParquetSink(lake / "ipc_copy", shards=2, coverage_store=raw_lane))
    rows = twg.to_dicts("item_rows", items, metadata="none")
    gathered = twg.to_batches(
        "item_batches", rows, schema=ITEM_SCHEMA, max_rows=4, keyed=True, locator="counter"
    )
    op.output("item_lane", gathered.batches, ParquetSink(lake / "item_lane", shards=1))
    op.output("item_rejects", gathered.rejected, ParquetSink(lake / "dlq_items", shards=1))
    return flow


def run(where: Layout) -> None:
    """Run the flow to the end of its inputs with recovery (one epoch per batch)."""
    from bytewax.recovery import RecoveryConfig
    from bytewax.testing import run_main

    run_main(
        build_flow(where),
        epoch_interval=timedelta(0),
        recovery_config=RecoveryConfig(str(where.recovery)),
    )


if __name__ == "__main__":
    run(layout(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT))
