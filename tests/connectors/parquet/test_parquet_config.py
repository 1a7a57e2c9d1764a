"""A Parquet sink's settings are one frozen model, whichever way they are written."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from thalweg_bytewax.config import load_config
from thalweg_bytewax.connectors.parquet import ParquetSink, ParquetSinkConfig


def test_the_keywords_build_the_model_the_environment_builds(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path, shards=4, compression="snappy", row_group_rows=1000)
    loaded = load_config(
        ParquetSinkConfig,
        env={
            "THALWEG_PATH": str(tmp_path),
            "THALWEG_SHARDS": "4",
            "THALWEG_COMPRESSION": "snappy",
            "THALWEG_ROW_GROUP_ROWS": "1000",
        },
    )
    assert sink.config == loaded


def test_the_model_is_frozen(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    with pytest.raises(pydantic.ValidationError):
        sink.config.shards = 2


def test_the_partitions_read_the_model_not_the_sink(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path, shards=1, row_group_rows=7)
    part = sink.build_part("flow.lake", "shard-000", None)
    try:
        assert part.config is sink.config
    finally:
        part.close()
