"""Durations read the same from Python, TOML, a variable and ``--set``; old keys warn."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import ClassVar

import pytest

from thalweg_bytewax.config import (
    ConfigModel,
    ConnectorConfig,
    PositiveDuration,
    SecretRef,
    load_config,
    renamed_keys,
)
from thalweg_bytewax.errors import ConfigError


class _Timed(ConfigModel):
    window: PositiveDuration = timedelta(hours=1)
    password: SecretRef | None = None


@pytest.mark.parametrize(
    ("written", "expected"),
    [("window = 90", 90.0), ("window = 0.5", 0.5), ('window = "PT2H"', 7200.0)],
)
def test_a_duration_in_toml_is_seconds_or_iso_8601(
    tmp_path: Path, written: str, expected: float
) -> None:
    file = tmp_path / "t.toml"
    file.write_text(written + "\n")
    assert load_config(_Timed, file=file, env={}).window == timedelta(seconds=expected)


def test_a_duration_in_a_variable_or_override_is_text_seconds() -> None:
    assert load_config(_Timed, env={"THALWEG_WINDOW": "120"}).window == timedelta(minutes=2)
    assert load_config(_Timed, env={}, overrides=["window=PT3M"]).window == timedelta(minutes=3)


def test_a_duration_shows_as_seconds_and_refuses_zero() -> None:
    assert _Timed(window=timedelta(minutes=5)).model_dump(mode="json")["window"] == 300.0
    with pytest.raises(ConfigError, match="`THALWEG_WINDOW`: expected greater than"):
        load_config(_Timed, env={"THALWEG_WINDOW": "0"})


def test_an_old_key_warns_and_moves_to_its_new_name() -> None:
    with pytest.warns(DeprecationWarning, match="`window_s` is deprecated; write `window`"):
        out = renamed_keys({"window_s": 5}, {"window_s": "window"}, where="t")
    assert out == {"window": 5}
    with pytest.raises(ConfigError, match="got both"):
        renamed_keys({"window_s": 5, "window": 6}, {"window_s": "window"}, where="t")


class _TimedConnector(ConnectorConfig):
    component: ClassVar[str] = "timed"
    window: PositiveDuration = timedelta(hours=1)
    password: SecretRef | None = None


def test_a_model_built_from_keywords_is_refused_by_key_without_quoting_a_secret() -> None:
    with pytest.raises(ConfigError, match=r"^timed: `window` expected") as caught:
        _TimedConnector.build({"window": "s3://u:hunter2@host/x", "password": 12345678})
    assert "`password`" in str(caught.value)
    assert "hunter2" not in str(caught.value)
    assert "12345678" not in str(caught.value)


def test_an_old_name_in_a_variable_is_read_not_ignored() -> None:
    # A variable of an old key used to be skipped as someone else's: the setting kept
    # its default (a 1 h dedup window for `THALWEG_DEDUP_WINDOW_S=300`) without a word.
    from thalweg_bytewax.flows.orders import OrdersSettings

    with pytest.warns(DeprecationWarning, match="`dedup_window_s` is deprecated"):
        settings = OrdersSettings.load(env={"THALWEG_DEDUP_WINDOW_S": "300"})
    assert settings.dedup_window == timedelta(minutes=5)
    with pytest.raises(ConfigError, match="`dedup_window_s` is the old name of `dedup_window`"):
        OrdersSettings.load(env={"THALWEG_DEDUP_WINDOW_S": "300", "THALWEG_DEDUP_WINDOW": "60"})
