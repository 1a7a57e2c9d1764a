"""A pipeline's ``[sinks.<name>]`` tables are the sink connectors' own configuration models."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from thalweg_bytewax.config import SecretRef
from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSink, ArrowIPCSinkConfig
from thalweg_bytewax.connectors.postgres import PostgresSinkConfig
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.pipeline import (
    ArrowIPCSinkSection,
    IcebergSinkSection,
    PipelineConfig,
    PostgresSinkSection,
)
from thalweg_bytewax.pipeline._endpoints import build_sink


def _load(tmp_path: Path, table: str) -> PipelineConfig:
    path = tmp_path / "pipeline.toml"
    path.write_text(f'data_dir = "{tmp_path}"\n[sinks.out]\nfrom = "clean"\n{table}\n')
    return PipelineConfig.load(path, env={})


def test_an_arrow_ipc_sink_is_reachable_from_toml(tmp_path: Path) -> None:
    config = _load(tmp_path, 'kind = "arrow_ipc"\npath = "ipc"\nformat = "stream"')
    section = config.sinks["out"]
    assert isinstance(section, ArrowIPCSinkSection)
    sink = build_sink("out", section, config, tmp_path)
    assert isinstance(sink, ArrowIPCSink)
    wanted = ArrowIPCSinkConfig(path=str(tmp_path / "ipc"), format="stream")
    assert sink.config == wanted


def test_a_postgres_section_is_the_sinks_model_with_durations_in_seconds(
    tmp_path: Path,
) -> None:
    table = 'kind = "postgres"\ndsn = "${env:PG_DSN}"\ntable = "orders"\nschema = "sales"\n'
    config = _load(tmp_path, table + 'retry_backoff = 2.5\nconnect_timeout = "PT30S"')
    section = config.sinks["out"]
    assert isinstance(section, PostgresSinkSection)
    assert isinstance(section, PostgresSinkConfig)
    assert section.db_schema == "sales"
    assert section.retry_backoff == timedelta(seconds=2.5)
    assert section.connect_timeout == timedelta(seconds=30)
    assert section.dsn == SecretRef("${env:PG_DSN}")


def test_db_schema_still_loads_with_a_deprecation_warning(tmp_path: Path) -> None:
    table = 'kind = "postgres"\ndsn = "${env:PG_DSN}"\ntable = "orders"\ndb_schema = "sales"'
    with pytest.warns(DeprecationWarning, match="`db_schema` is deprecated; write `schema`"):
        config = _load(tmp_path, table)
    section = config.sinks["out"]
    assert isinstance(section, PostgresSinkSection)
    assert section.db_schema == "sales"


def test_db_schema_beside_schema_is_refused_naming_both(tmp_path: Path) -> None:
    table = 'kind = "postgres"\ndsn = "${env:PG_DSN}"\ntable = "orders"\nschema = "a"\n'
    with pytest.raises(ConfigError, match="`db_schema` is the old name of `schema`; got both"):
        _load(tmp_path, table + 'db_schema = "b"')


def test_iceberg_warehouse_and_catalog_uri_still_load_with_a_deprecation_warning(
    tmp_path: Path,
) -> None:
    table = (
        'kind = "iceberg"\ntable = "sales.orders"\nwarehouse = "wh"\n'
        'catalog_uri = "sqlite:///${env:CATALOG_DB}"'
    )
    with pytest.warns(DeprecationWarning) as caught:
        config = _load(tmp_path, table)
    said = " ".join(str(w.message) for w in caught)
    assert "`warehouse` is deprecated" in said and "`catalog_uri` is deprecated" in said
    section = config.sinks["out"]
    assert isinstance(section, IcebergSinkSection)
    assert section.catalog.warehouse == "wh"
    assert section.catalog.uri == SecretRef("sqlite:///${env:CATALOG_DB}")


def test_an_iceberg_section_without_a_catalog_uses_sqlite_in_the_warehouse(
    tmp_path: Path,
) -> None:
    config = _load(tmp_path, 'kind = "iceberg"\ntable = "sales.orders"')
    section = config.sinks["out"]
    assert isinstance(section, IcebergSinkSection)
    assert section.catalog.warehouse == "warehouse"


def test_a_key_of_another_kind_is_refused_naming_the_kinds_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, 'kind = "parquet"\npath = "lane"\ntable = "orders"')
    text = str(info.value)
    assert "`sinks.out.table`" in text and "unknown key" in text and "`path`" in text


def test_an_optional_postgres_sink_whose_dsn_is_unset_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PG_DSN", raising=False)
    table = 'kind = "postgres"\ndsn = "${env:PG_DSN}"\ntable = "orders"\noptional = true\n'
    config = _load(tmp_path, table)
    assert build_sink("out", config.sinks["out"], config, tmp_path) is None
    strict = config.sinks["out"].model_copy(update={"optional": False})
    with pytest.raises(ConfigError, match="PG_DSN"):
        build_sink("out", strict, config, tmp_path)


def test_an_iceberg_history_kept_whole_is_spelled_all_in_toml(tmp_path: Path) -> None:
    config = _load(tmp_path, 'kind = "iceberg"\ntable = "sales.orders"\nkeep_snapshots = "all"')
    section = config.sinks["out"]
    assert isinstance(section, IcebergSinkSection)
    assert section.keep_snapshots is None  # never expire
    bounded = _load(tmp_path, 'kind = "iceberg"\ntable = "sales.orders"\nkeep_snapshots = 500')
    assert bounded.sinks["out"].keep_snapshots == 500  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match=r"`sinks\.out\.keep_snapshots`"):
        _load(tmp_path, 'kind = "iceberg"\ntable = "sales.orders"\nkeep_snapshots = "most"')
    with pytest.raises(ConfigError, match=r"`sinks\.out\.keep_snapshots`"):
        _load(tmp_path, 'kind = "iceberg"\ntable = "sales.orders"\nkeep_snapshots = 10')
