"""The pipeline of ``flows/orders.toml`` lands what ``flows.orders`` lands, row for row."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from bytewax.testing import run_main

from flows.orders import OrdersSettings, build_flow
from flows.pipeline import build_pipeline, load_pipeline
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.pipeline import PipelineConfig

REPO = Path(__file__).resolve().parents[2]
ORDERS_TOML = REPO / "flows" / "orders.toml"
N = 3_000
# Stamped when a record is read or landed: they differ between any two runs.
STAMPS = ("_twg_ingest_ts", "_twg_emit_ts", "rejected_at", "evaluated_at")
TABLES = ("orders", "order_lines", "revenue_per_status_minute")


def _canonical(table: pa.Table) -> list[dict]:
    keep = [n for n in table.column_names if not any(n.endswith(s) for s in STAMPS)]
    rows = table.select(keep).to_pylist()
    return sorted(rows, key=repr)


def _tables(data_dir: Path) -> dict[str, list[dict]]:
    catalog = IcebergCatalogConfig(warehouse=str(data_dir / "warehouse")).load()
    return {t: _canonical(catalog.load_table(f"sales.{t}").scan().to_arrow()) for t in TABLES}


def _lanes(data_dir: Path) -> dict[str, list[dict]]:
    return {lane: _canonical(read_lane(data_dir / lane)) for lane in ("raw", "dlq", "audit")}


def test_orders_toml_lands_the_same_lanes_and_tables_as_flows_orders(tmp_path):
    direct, piped = tmp_path / "direct", tmp_path / "pipeline"
    run_main(build_flow(OrdersSettings(data_dir=direct, sample_orders=N)))
    config = PipelineConfig.load(
        ORDERS_TOML, env={}, overrides=[f"data_dir={piped}", f"source.count={N}"]
    )
    run_main(build_pipeline(config, base_dir=ORDERS_TOML.parent))

    lanes, tables = _lanes(direct), _tables(direct)
    assert len(lanes["raw"]) == N and len(tables["orders"]) > N * 0.99
    assert len(tables["revenue_per_status_minute"]) > 0
    assert _lanes(piped) == lanes
    assert _tables(piped) == tables
    rules = sorted(p.name for p in (direct / "rules").iterdir())
    assert sorted(p.name for p in (piped / "rules").iterdir()) == rules


def test_orders_toml_is_the_orders_settings_at_their_defaults():
    config = PipelineConfig.load(ORDERS_TOML, env={})
    settings = OrdersSettings().pipeline()
    base = ORDERS_TOML.parent
    assert config.codec.schema_dir and config.codec.reader_schema and config.contract.path
    # The file names resources relative to itself; the settings hold absolute paths.
    assert str(base / config.codec.schema_dir) == settings.codec.schema_dir
    assert str(base / config.codec.reader_schema) == settings.codec.reader_schema
    assert str(base / config.contract.path) == settings.contract.path
    same = {"codec": {"schema_dir", "reader_schema"}, "contract": {"path"}}
    assert config.model_dump(exclude=same) == settings.model_dump(exclude=same)


def test_load_pipeline_reads_thalweg_config_relative_to_the_file(monkeypatch, tmp_path):
    monkeypatch.setenv("THALWEG_CONFIG", str(ORDERS_TOML))
    config, base = load_pipeline()
    assert config.name == "orders" and base == ORDERS_TOML.parent


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("sinks.x.kind=iceberg", "sinks"),
        ("source.kind=kafka", "source.bootstrap_servers"),
        ("source.kind=files", "source.paths"),
    ],
)
def test_bad_wiring_is_refused_at_load_naming_the_key(override, named):
    with pytest.raises(ConfigError, match=named.split(".")[-1]):
        PipelineConfig.load(ORDERS_TOML, env={}, overrides=[override])


def test_a_sink_reading_an_unknown_stream_is_refused():
    extra = ["sinks.x.kind=parquet", "sinks.x.from=nowhere", "sinks.x.path=lane"]
    with pytest.raises(ConfigError, match="`x`.*nowhere"):
        PipelineConfig.load(ORDERS_TOML, env={}, overrides=extra)
