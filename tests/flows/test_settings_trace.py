"""Two settings traced end to end: one name and one type from TOML, variable and flag to use.

The dedup window and a Kafka SASL password, as docs/configuration.md ("One model per
source, one name per setting") draws them: each layer sets them under the same key, the
loaded configuration holds them typed (a ``timedelta``, a ``SecretRef``), and the place
that uses them gets that type (the dedup operator) or, for the secret, its value
resolved there and nowhere else.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import thalweg_bytewax.operators as twg
from thalweg_bytewax.cli import main
from thalweg_bytewax.config import SecretRef
from thalweg_bytewax.connectors.kafka import KafkaSource, KafkaSourceConfig
from thalweg_bytewax.pipeline import PipelineConfig
from thalweg_bytewax.pipeline.build import build_pipeline, pipeline_source

PASSWORD = "sasl-Pw-traced-7Q"


def _windows_used(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The ``window`` every ``twg.dedup`` call gets (the operator runs as it is)."""
    seen: list[Any] = []
    real = twg.dedup

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["window"])
        return real(*args, **kwargs)

    monkeypatch.setattr(twg, "dedup", spy)
    return seen


@pytest.mark.parametrize(
    ("env", "overrides", "expected"),
    [
        ({}, [], timedelta(hours=2)),
        ({"THALWEG_DEDUP__WINDOW": "5400"}, [], timedelta(minutes=90)),
        ({"THALWEG_DEDUP__WINDOW": "5400"}, ["dedup.window=PT30M"], timedelta(minutes=30)),
    ],
)
def test_the_dedup_window_reaches_the_operator_as_a_timedelta(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    overrides: list[str],
    expected: timedelta,
) -> None:
    file = tmp_path / "p.toml"
    file.write_text(f'data_dir = "{tmp_path}"\n[source]\ncount = 10\n[dedup]\nwindow = "PT2H"\n')
    config = PipelineConfig.load(file, env=env, overrides=overrides)
    assert config.dedup.window == expected
    seen = _windows_used(monkeypatch)
    build_pipeline(config, base_dir=tmp_path)
    assert seen == [expected]
    assert all(type(w) is timedelta for w in seen)


def test_the_old_dedup_key_warns_and_means_the_same(tmp_path: Path) -> None:
    file = tmp_path / "old.toml"
    file.write_text("[dedup]\nwindow_s = 600\n")
    with pytest.warns(DeprecationWarning, match="`window_s` is deprecated; write `window`"):
        config = PipelineConfig.load(file, env={})
    assert config.dedup.window == timedelta(minutes=10)


@pytest.mark.parametrize("layer", ["toml", "env", "cli"])
def test_the_sasl_password_is_a_secret_resolved_only_for_the_consumer(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    layer: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("THALWEG_CONFIG", "THALWEG_SOURCE__PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KAFKA_PASSWORD", PASSWORD)
    reference = "${env:KAFKA_PASSWORD}"
    lines = ['[source]\nkind = "kafka"\nbrokers = "127.0.0.1:1"']
    env: dict[str, str] = {}
    overrides: list[str] = []
    if layer == "toml":
        lines.append(f'password = "{reference}"')
    elif layer == "env":
        env["THALWEG_SOURCE__PASSWORD"] = reference
    else:
        overrides.append(f"source.password={reference}")
    file = tmp_path / "kafka.toml"
    file.write_text("\n".join(lines) + "\n")

    config = PipelineConfig.load(file, env=env, overrides=overrides)
    assert isinstance(config.source, KafkaSourceConfig)
    assert config.source.password == SecretRef(reference)
    source = pipeline_source(config)
    assert isinstance(source, KafkaSource) and source.config is config.source
    # The place of use: the librdkafka settings each partition's consumer is built with.
    assert source.config.consumer_config()["sasl.password"] == PASSWORD

    monkeypatch.setenv("THALWEG_SOURCE__PASSWORD", env.get("THALWEG_SOURCE__PASSWORD", ""))
    flags = [f"--set={o}" for o in overrides]
    assert main(["config", "show", str(file), *flags]) == 0
    assert main(["config", "show", "--json", str(file), *flags]) == 0
    shown = capsys.readouterr().out
    assert reference in shown
    printed = f"{shown} {config!r} {source.config!r} {config.model_dump_json()}"
    printed += " ".join(r.getMessage() for r in caplog.records)
    assert PASSWORD not in printed
