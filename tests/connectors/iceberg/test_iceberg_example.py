"""docs/examples/iceberg_sink.py runs as written; running it twice writes nothing twice."""

from __future__ import annotations

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_iceberg_example_runs_and_a_rerun_writes_nothing_twice(tmp_path: Path) -> None:
    module = runpy.run_path(str(ROOT / "docs/examples/iceberg_sink.py"))
    first = module["main"](str(tmp_path / "warehouse"))
    assert first.num_rows == 60
    again = module["main"](str(tmp_path / "warehouse"))  # same step id: every offset covered
    assert again.num_rows == 60


def test_the_iceberg_example_refills_a_table_whose_rows_were_deleted(tmp_path: Path) -> None:
    from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig

    module = runpy.run_path(str(ROOT / "docs/examples/iceberg_sink.py"))
    warehouse = str(tmp_path / "warehouse")
    assert module["main"](warehouse).num_rows == 60
    IcebergCatalogConfig(warehouse=warehouse).load().load_table("shop.orders").delete()
    assert module["main"](warehouse).num_rows == 60  # refilled, not 0
    assert module["main"](warehouse).num_rows == 60  # and a rerun adds nothing
