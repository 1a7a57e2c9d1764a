"""Kill ``thalweg batch`` mid-run, run the same command again: each row lands once."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flows.orders import SCHEMA_DIR
from tests.fixtures.crash import CrashableFlow, CrashHarness
from thalweg_bytewax.codecs import AvroCodec
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig
from thalweg_bytewax.dev._orders_sample import sample_order_at
from thalweg_bytewax.dev.samples import encode_order_avro
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.registry import DirectorySchemaSource

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
FILES, ROWS = 3, 1_200
BREAKERS = sum(1 for i in range(FILES * ROWS) if i % 1000 == 250)  # orders breaking the contract


def make_files(root: Path) -> None:
    """Decoded sample orders as Parquet files, as an export of the orders topic would be."""
    root.mkdir()
    codec = AvroCodec(
        DirectorySchemaSource(SCHEMA_DIR), reader_schema=(SCHEMA_DIR / "1.avsc").read_text()
    )
    payloads = pa.array(
        [encode_order_avro(sample_order_at(7, i)) for i in range(FILES * ROWS)], pa.binary()
    )
    table = pa.Table.from_batches([codec.decode_batch(payloads).batch])
    for k in range(FILES):
        pq.write_table(table.slice(k * ROWS, ROWS), root / f"orders-{k}.parquet")


def batch(crash: CrashHarness, files: Path, data: Path) -> CrashableFlow:
    """``thalweg batch`` of the flagship pipeline over ``files`` into ``data``."""
    argv = [
        sys.executable, "-m", "thalweg_bytewax.cli", "batch", str(REPO / "thalweg_bytewax" / "flows" / "orders.toml"),
        "--files", str(files / "orders-*.parquet"), "--set", f"data_dir={data}",
        "--set", "source.batch_rows=200", "--epoch-s", "0.1", "--no-progress",
    ]  # fmt: skip
    return crash.command(argv, timeout_s=300)


def located(table: pa.Table, *extra: str) -> list[tuple]:
    cols = ["_twg_source_topic", "_twg_source_offset", *extra]
    return list(zip(*(table.column(c).to_pylist() for c in cols), strict=True))


@pytest.mark.parametrize("fault", ["iceberg.after_commit:3", "parquet.before_finalize:4"])
def test_killed_batch_resumes_and_lands_each_row_once(crash: CrashHarness, tmp_path, fault):
    files, data = tmp_path / "files", tmp_path / "data"
    make_files(files)
    run = batch(crash, files, data)

    run.killed_at(fault)
    raw_before = read_lane(data / "raw").num_rows if (data / "raw").exists() else 0
    assert raw_before < FILES * ROWS, "killed after everything landed: move the fault earlier"

    resumed = run.finishes()
    assert "(resumed)" in resumed.stdout and "rejected:" in resumed.stdout

    raw = located(read_lane(data / "raw"))
    assert len(raw) == len(set(raw)) == FILES * ROWS
    catalog = IcebergCatalogConfig(warehouse=str(data / "warehouse")).load()
    orders = located(catalog.load_table("sales.orders").scan().to_arrow())
    assert len(orders) == len(set(orders)) == FILES * ROWS - BREAKERS
    lines = catalog.load_table("sales.order_lines").scan().to_arrow()
    keys = list(zip(lines["order_id"].to_pylist(), lines["line_no"].to_pylist(), strict=True))
    assert len(keys) == len(set(keys))
    dlq = located(read_lane(data / "dlq"))
    assert len(dlq) == len(set(dlq)) == BREAKERS

    again = run.finishes()  # every file finished: nothing is read again
    assert "nothing new (no new records)" in again.stdout, again.stdout
    assert len(catalog.load_table("sales.orders").scan().to_arrow()) == len(orders)
