"""A pipeline's ``[source]`` is one of the source connectors' own models, chosen by ``kind``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from thalweg_bytewax.connectors.files import FileSource, FileSourceConfig
from thalweg_bytewax.connectors.kafka import KafkaSource, KafkaSourceConfig
from thalweg_bytewax.connectors.raw_lane import RawLaneSource, RawLaneSourceConfig
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.pipeline import PipelineConfig
from thalweg_bytewax.pipeline.build import SAMPLE_SCHEMAS, build_pipeline, pipeline_source


def _load(tmp_path: Path, text: str, **kwargs: object) -> PipelineConfig:
    file = tmp_path / "p.toml"
    file.write_text(f'data_dir = "{tmp_path}"\n' + text)
    return PipelineConfig.load(file, env={}, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("table", "model", "source"),
    [
        ('kind = "kafka"\nbrokers = "b:9092"', KafkaSourceConfig, KafkaSource),
        ('kind = "files"\npaths = ["x.parquet"]', FileSourceConfig, FileSource),
        ('kind = "raw_lane"\npath = "lanes/raw"', RawLaneSourceConfig, RawLaneSource),
    ],
)
def test_every_source_is_reachable_from_toml_as_its_own_model(
    tmp_path: Path, table: str, model: type, source: type
) -> None:
    config = _load(tmp_path, f"[source]\n{table}\n")
    assert type(config.source) is model
    built = pipeline_source(config)
    assert isinstance(built, source)


def test_a_raw_lane_source_reads_under_data_dir_and_the_flow_does_not_rewrite_it(
    tmp_path: Path,
) -> None:
    codec = f'[codec]\nschema_dir = "{SAMPLE_SCHEMAS}"\n'
    config = _load(tmp_path, f'[source]\nkind = "raw_lane"\npath = "raw"\n{codec}')
    built = pipeline_source(config)
    assert isinstance(built, RawLaneSource) and built.lane == str(tmp_path / "raw")
    flow = build_pipeline(config, base_dir=tmp_path)
    steps = {s.step_name for s in flow.substeps}
    assert "raw_lane" not in steps


def test_keys_of_another_kind_left_by_a_lower_layer_are_not_used_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    config = _load(
        tmp_path,
        '[source]\nkind = "sample"\ncount = 10\n',
        overrides=["source.kind=kafka", "source.brokers=b:9092"],
    )
    assert isinstance(config.source, KafkaSourceConfig)
    assert "keys of other kinds not used: ['count']" in caplog.text


def test_a_key_no_kind_takes_is_refused_naming_the_kinds_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"`source.bogus` in .*unknown key; expected one of"):
        _load(tmp_path, '[source]\nkind = "kafka"\nbrokers = "b"\nbogus = 1\n')
    with pytest.raises(ConfigError, match=r"`kind` expected one of \['kafka', 'files'"):
        _load(tmp_path, '[source]\nkind = "pulsar"\n')
