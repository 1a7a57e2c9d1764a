"""An Iceberg sink's settings are one frozen model, with its catalog's secrets masked."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from thalweg_bytewax.config import load_config
from thalweg_bytewax.connectors.iceberg import IcebergSink, IcebergSinkConfig


def test_the_keywords_build_the_model_the_environment_builds(tmp_path: Path) -> None:
    sink = IcebergSink(
        tmp_path / "wh", "shop.orders", partition_by=["day(created_at)"], commit_retries=3
    )
    env = {
        "THALWEG_CATALOG__WAREHOUSE": str(tmp_path / "wh"),
        "THALWEG_TABLE": "shop.orders",
        "THALWEG_PARTITION_BY": "day(created_at)",
        "THALWEG_COMMIT_RETRIES": "3",
    }
    assert load_config(IcebergSinkConfig, env=env) == sink.config
    with pytest.raises(pydantic.ValidationError):
        sink.config.shards = 2


def test_a_catalog_token_is_in_no_repr_or_dump(tmp_path: Path) -> None:
    catalog = {"type": "rest", "uri": "https://catalog.example/api", "token": "s3cr3t-token"}
    sink = IcebergSink(catalog, "shop.orders")
    shown = [repr(sink), repr(sink.config), str(sink.config.model_dump(mode="json"))]
    assert not [text for text in shown if "s3cr3t-token" in text]
