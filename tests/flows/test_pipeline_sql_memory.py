"""A pipeline file bounds the memory of its SQL: `[sql] memory_limit_mb`, `[contract] sql_memory_limit_mb`."""

from __future__ import annotations

from pathlib import Path

import pytest
from bytewax.testing import run_main

from flows.pipeline import build_pipeline
from thalweg_bytewax.pipeline import PipelineConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
QUERY = "SELECT order_id, created_at, status, total FROM input"
# Per batch: every order times a million, distinct: far past 16 MiB within a second.
GREEDY = (
    "SELECT order_id, created_at, status, total FROM input "
    "WHERE customer_id > (SELECT count(DISTINCT i) - 10000000 FROM range(8000000) t(i))"
)


def _chain(exc: BaseException | None) -> str:
    text = ""
    while exc is not None:
        text += f"{exc}\n"
        exc = exc.__cause__ or exc.__context__
    return text


def test_the_sql_memory_limit_of_a_pipeline_file_bounds_its_nodes(tmp_path: Path) -> None:
    text = (EXAMPLES / "windows_tumbling.toml").read_text("utf-8")
    assert QUERY in text
    file = tmp_path / "pipeline.toml"
    file.write_text(
        text.replace(QUERY, GREEDY).replace(
            "[[sql.nodes]]", "[sql]\nmemory_limit_mb = 16\n\n[[sql.nodes]]"
        ),
        encoding="utf-8",
    )
    config = PipelineConfig.load(
        file, env={}, overrides=[f"data_dir={tmp_path}", "source.count=50"]
    )
    assert config.sql.memory_limit_mb == 16
    with pytest.raises(Exception) as info:  # noqa: PT011 - build or run, as DuckDB plans it
        run_main(build_pipeline(config, base_dir=EXAMPLES))
    text = _chain(info.value)
    assert "sql `orders`: expected the query to fit in the memory limit of 16 MiB" in text, text
    assert "`[sql] memory_limit_mb` in a pipeline file" in text


@pytest.mark.parametrize(
    ("key", "value"), [("sql.memory_limit_mb", "8"), ("contract.sql_memory_limit_mb", "0")]
)
def test_a_memory_limit_under_16_mib_is_refused_at_load(key: str, value: str) -> None:
    with pytest.raises(Exception, match=key.rsplit(".", 1)[-1]):
        PipelineConfig.load(
            EXAMPLES / "windows_tumbling.toml", env={}, overrides=[f"{key}={value}"]
        )
