"""A connector's configuration model: one error naming the key, durations as timedelta."""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

import pytest
from pydantic import Field

from thalweg_bytewax.config import ConnectorConfig, Duration, SecretRef, load_config
from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSinkConfig, ArrowIPCSourceConfig
from thalweg_bytewax.connectors.iceberg import IcebergSinkConfig
from thalweg_bytewax.connectors.parquet import ParquetSinkConfig
from thalweg_bytewax.connectors.postgres import PostgresSinkConfig
from thalweg_bytewax.errors import ConfigError


class _Demo(ConnectorConfig):
    component: ClassVar[str] = "demo sink"
    shards: int = Field(default=1, ge=1)
    """Sink partitions."""
    wait: Duration = Field(default=timedelta(seconds=1), gt=timedelta(0))
    """How long to wait."""
    dsn: SecretRef | None = None
    """Where to connect."""


@pytest.mark.parametrize(
    ("written", "wanted"),
    [
        (2.5, timedelta(seconds=2.5)),
        (3, timedelta(seconds=3)),
        ("0.5", timedelta(seconds=0.5)),
        ("PT1M30S", timedelta(seconds=90)),
        (timedelta(minutes=2), timedelta(minutes=2)),
    ],
)
def test_a_duration_is_seconds_or_iso_8601_and_a_timedelta_in_python(written, wanted) -> None:
    assert _Demo.build({"wait": written}).wait == wanted


def test_a_duration_shows_as_seconds_and_loads_back_from_the_environment() -> None:
    config = _Demo.build({"wait": timedelta(minutes=1)})
    assert config.model_dump(mode="json")["wait"] == 60.0
    loaded = load_config(_Demo, env={"THALWEG_WAIT": "60"})
    assert loaded.wait == timedelta(minutes=1)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"shards": 0}, "demo sink: `shards` expected an integer >= 1; got 0"),
        ({"wait": -1}, "demo sink: `wait` expected greater than 0 seconds; got -1 seconds"),
        ({"wait": True}, "demo sink: `wait`: expected a duration"),
        ({"sharsd": 2}, "demo sink: `sharsd`: unknown setting; expected one of `shards`"),
    ],
)
def test_a_bad_keyword_is_one_config_error_naming_the_connector_and_key(values, message) -> None:
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(")):
        _Demo.build(values)


def test_a_secret_keyword_is_never_quoted_when_refused() -> None:
    with pytest.raises(ConfigError) as info:
        _Demo.build({"dsn": 12345678})
    assert "12345678" not in str(info.value)
    assert repr(_Demo.build({"dsn": "postgresql://u:hunter2@db/x"})).count("hunter2") == 0


@pytest.mark.parametrize(
    ("model", "values"),
    [
        (ParquetSinkConfig, {"path": "lake"}),
        (ArrowIPCSinkConfig, {"path": "lake"}),
        (ArrowIPCSourceConfig, {"path": "lake"}),
        (IcebergSinkConfig, {"catalog": "wh", "table": "sales.orders"}),
        (PostgresSinkConfig, {"dsn": "postgresql://db/x", "table": "orders"}),
    ],
)
def test_every_sink_model_refuses_a_metadata_prefix_that_makes_bad_column_names(
    model: type[ConnectorConfig], values: dict[str, object]
) -> None:
    with pytest.raises(ConfigError, match=f"^{model.component}: `metadata_prefix`"):
        model.build({**values, "metadata_prefix": "bad prefix!"})
    assert model.build({**values, "metadata_prefix": "_x_"}).metadata_prefix == "_x_"  # type: ignore[attr-defined]
