"""A FileSource's settings are one frozen model, whether from keywords, TOML or variables."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from thalweg_bytewax.config import SecretRef, load_config
from thalweg_bytewax.connectors.files import (
    FileFormat,
    FileLimits,
    FileSource,
    FileSourceConfig,
    XmlLimits,
)
from thalweg_bytewax.connectors.files.config import resolve_options
from thalweg_bytewax.errors import ConfigError

SCHEMA = pa.schema([("id", pa.int64())])


def test_keywords_and_a_toml_file_build_the_same_model(tmp_path: Path) -> None:
    file = tmp_path / "files.toml"
    file.write_text(
        'paths = ["data/*.xml"]\nformat = "xml"\nrecord_path = "/orders/order"\n'
        "batch_rows = 10\n[limits]\nmax_line_bytes = 1024\n[xml_limits]\nmax_depth = 4\n"
    )
    loaded = load_config(FileSourceConfig, file=file, env={})
    built = FileSource(
        "data/*.xml",
        format="xml",
        schema=SCHEMA,
        record_path="/orders/order",
        batch_rows=10,
        limits=FileLimits(max_line_bytes=1024),
        xml_limits=XmlLimits(max_depth=4),
    ).config
    assert built == loaded
    assert loaded.format is FileFormat.XML and loaded.limits.max_line_bytes == 1024
    source = FileSource.from_config(loaded, schema=SCHEMA)
    assert source.config is loaded and source.schema == SCHEMA


def test_a_variable_sets_a_key_and_inference_is_a_flag() -> None:
    env = {"THALWEG_PATHS": "a.csv,b.csv", "THALWEG_INFER_SCHEMA": "true"}
    config = load_config(FileSourceConfig, env=env)
    assert config.paths == ["a.csv", "b.csv"] and config.infer_schema
    assert FileSource(["a.csv", "b.csv"], schema="infer").config == config


def test_a_format_without_a_schema_still_needs_one() -> None:
    config = FileSourceConfig(paths=["a.csv"], format=FileFormat.CSV)
    with pytest.raises(ConfigError, match="expected `schema=`"):
        FileSource.from_config(config)


def test_storage_credentials_are_secrets_resolved_only_to_open_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("S3_SECRET", "s3-secret-from-env")
    env = {"THALWEG_PATHS": str(tmp_path / "x.csv")}
    file = tmp_path / "s.toml"
    file.write_text('[storage_options]\nsecret = "${env:S3_SECRET}"\ntoken = "tok-literal"\n')
    config = load_config(FileSourceConfig, file=file, env=env)
    assert isinstance(config.storage_options["secret"], SecretRef)
    shown = f"{config!r} {config} {config.model_dump_json()}"
    assert "s3-secret-from-env" not in shown and "tok-literal" not in shown
    assert resolve_options(config.storage_options) == {
        "secret": "s3-secret-from-env",
        "token": "tok-literal",
    }
