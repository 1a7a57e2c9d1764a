"""``thalweg batch`` ends with the flows' summary: per sink the rows landed, rejects by reason."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flows.orders import SCHEMA_DIR
from thalweg_bytewax.codecs import AvroCodec
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig
from thalweg_bytewax.dev._orders_sample import sample_order_at
from thalweg_bytewax.dev.samples import encode_order_avro
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.registry import DirectorySchemaSource

REPO = Path(__file__).resolve().parents[2]
ROWS = 1_100  # per file; order 250 of every thousand breaks the contract
TABLES = ("sales.orders", "sales.order_lines", "sales.revenue_per_status_minute")


def _write_file(path: Path, first: int) -> None:
    """Decoded sample orders ``first .. first + ROWS`` as a Parquet file (an export)."""
    reader = (SCHEMA_DIR / "1.avsc").read_text("utf-8")
    codec = AvroCodec(DirectorySchemaSource(SCHEMA_DIR), reader_schema=reader)
    orders = [encode_order_avro(sample_order_at(7, i)) for i in range(first, first + ROWS)]
    pq.write_table(pa.Table.from_batches([codec.decode_batch(pa.array(orders)).batch]), path)


def _batch(files: Path, data: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    argv = [
        sys.executable, "-m", "thalweg_bytewax.cli", "batch", str(REPO / "thalweg_bytewax" / "flows" / "orders.toml"),
        "--files", str(files / "*.parquet"), "--set", f"data_dir={data}",
        "--set", "sinks.lines_lane.kind=parquet", "--set", "sinks.lines_lane.from=order_lines",
        "--set", "sinks.lines_lane.path=lines", "--no-progress",
    ]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def _landed(data: Path) -> dict[str, int]:
    """Rows in every target, read from the targets themselves."""
    catalog = IcebergCatalogConfig(warehouse=str(data / "warehouse")).load()
    rows = {t: len(catalog.load_table(t).scan().to_arrow()) for t in TABLES}
    rows["lines"] = read_lane(data / "lines").num_rows
    rows["dlq"] = read_lane(data / "dlq").num_rows
    rows["raw"] = read_lane(data / "raw").num_rows
    return rows


def _printed(lines: list[str], data: Path) -> dict[str, tuple[int, int]]:
    """(total, added) per target, as the summary prints them."""
    ice = f"(iceberg {data / 'warehouse'})"
    places = {t: f"  table {t} {ice}: " for t in TABLES}
    places |= {
        "lines": f"  lane {data / 'lines'} (parquet): ",
        "dlq": f"  dlq lane {data / 'dlq'}: ",
        "raw": f"  raw lane {data / 'raw'}: ",
    }
    out = {}
    for name, start in places.items():
        (line,) = [x for x in lines if x.startswith(start)]
        total, added = re.fullmatch(r"([\d,]+) \w+ \(\+([\d,]+)\)", line[len(start) :]).groups()  # type: ignore[union-attr]
        out[name] = (int(total.replace(",", "")), int(added.replace(",", "")))
    return out


def _rejected(lines: list[str]) -> Counter[str]:
    (line,) = [x for x in lines if x.startswith("  rejected: ")]
    by = re.fullmatch(r"  rejected: [\d,]+ \((.*)\)", line).group(1)  # type: ignore[union-attr]
    return Counter({r: int(n.replace(",", "")) for r, n in (p.split(" ") for p in by.split(", "))})


@pytest.mark.slow
def test_the_batch_summary_prints_the_rows_each_sink_landed(tmp_path: Path) -> None:
    files, data = tmp_path / "files", tmp_path / "data"
    files.mkdir()
    _write_file(files / "orders-0.parquet", 0)
    first = _batch(files, data)
    assert first[0].startswith(f"batch `orders`: {ROWS:,} records read in "), first
    landed = _landed(data)
    assert _printed(first, data) == {name: (n, n) for name, n in landed.items()}
    assert landed["lines"] == landed["sales.order_lines"] > landed["sales.orders"] > 0
    dlq = read_lane(data / "dlq")
    assert _rejected(first) == Counter(dlq.column("reason").to_pylist())
    assert first[-1].startswith("  1 file read; lanes under ")

    # One more file: the resumed run says what it added to each target.
    _write_file(files / "orders-1.parquet", ROWS)
    second = _batch(files, data)
    assert second[0].startswith(f"batch `orders` (resumed): {ROWS:,} records read in "), second
    after = _landed(data)
    assert _printed(second, data) == {n: (after[n], after[n] - landed[n]) for n in after}
    assert after["raw"] == 2 * ROWS and Counter(
        read_lane(data / "dlq").column("reason").to_pylist()
    ) == (_rejected(first) + _rejected(second))

    # Nothing new: one line says so, and where every target stands.
    (third, last) = _batch(files, data)
    assert third.startswith("batch `orders` (resumed): nothing new (no new records); raw lane ")
    assert f"sales.orders {after['sales.orders']:,} rows" in third
    assert f"lane {data / 'lines'}: {after['lines']:,} rows" in third
    assert f"dlq lane {data / 'dlq'}: {after['dlq']:,} rows" in third
    assert last.startswith("  0 files read;")
