"""A RawLaneSource's settings are one frozen model, whether from keywords or a TOML file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.connectors.raw_lane.test_raw_lane_source import COLS, replay, write_lane
from thalweg_bytewax.config import load_config
from thalweg_bytewax.connectors.raw_lane import RawLaneSource, RawLaneSourceConfig
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.errors import ConfigError


def test_keywords_and_a_toml_file_build_the_same_model(tmp_path: Path) -> None:
    file = tmp_path / "lane.toml"
    file.write_text('path = "lake/raw"\nbatch_size = 7\n[offsets]\n"t:0" = [[10, 19], [40, 49]]\n')
    loaded = load_config(RawLaneSourceConfig, file=file, env={})
    plan = {("t", 0): OffsetCoverage([(10, 19), (40, 49)])}
    assert RawLaneSource("lake/raw", plan, batch_size=7).config == loaded
    assert loaded.plan() == plan


def test_without_offsets_the_whole_lane_is_replayed(tmp_path: Path) -> None:
    lane = write_lane(tmp_path)
    source = RawLaneSource.from_config(RawLaneSourceConfig(path=str(lane), batch_size=30))
    got = replay(source)
    offsets = {
        key: sorted(o for _, b in got if _ == key for o in b.column(COLS.source_offset).to_pylist())
        for key in ("t:0", "t:1")
    }
    assert offsets == {"t:0": list(range(100)), "t:1": list(range(100))}
    assert max(b.num_rows for _, b in got) <= 30


def test_a_bad_partition_key_or_span_is_refused_by_name(tmp_path: Path) -> None:
    file = tmp_path / "bad.toml"
    file.write_text('path = "raw"\n[offsets]\n"t:0" = [[9, 3]]\n')
    with pytest.raises(ConfigError, match="offsets"):
        load_config(RawLaneSourceConfig, file=file, env={})
    with pytest.raises(ConfigError, match="`batch_size` expected an integer >= 1"):
        RawLaneSource("raw", None, batch_size=0)
