"""The dev broker and database helpers take their waits as timedelta; old `_s` names warn."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from thalweg_bytewax.dev._apache_kafka import ApacheKafka
from thalweg_bytewax.dev._kafka_jars import KAFKA_VERSION, fetch_jars
from thalweg_bytewax.dev._postgres import published_dsn
from thalweg_bytewax.errors import ConfigError


def test_published_dsn_waits_for_a_timedelta_and_the_old_name_warns(tmp_path: Path) -> None:
    dsn_file = tmp_path / "postgres.dsn"
    with pytest.raises(ConfigError, match=r"within 0\.001 s; got none"):
        published_dsn(dsn_file, timedelta(milliseconds=1))
    dsn_file.write_text("postgresql://localhost/db\n")
    assert published_dsn(dsn_file, timedelta(seconds=1)) == "postgresql://localhost/db"
    assert published_dsn(dsn_file) == "postgresql://localhost/db"
    with pytest.warns(DeprecationWarning, match="published_dsn: `wait_s` is deprecated; pass `w"):
        assert published_dsn(dsn_file, wait_s=1) == "postgresql://localhost/db"
    with pytest.raises(ConfigError, match="`wait` expected a datetime.timedelta; got 120"):
        published_dsn(dsn_file, 120)  # type: ignore[arg-type]


def test_fetch_jars_takes_its_timeout_as_a_timedelta(tmp_path: Path) -> None:
    root = tmp_path / KAFKA_VERSION
    root.mkdir()
    (root / "complete").touch()  # fetched before: no Maven run
    jars = root.resolve() / "jars"
    assert fetch_jars(tmp_path, timeout=timedelta(minutes=1)) == jars
    with pytest.warns(DeprecationWarning, match="fetch_jars: `timeout_s` is deprecated"):
        assert fetch_jars(tmp_path, timeout_s=60) == jars
    with pytest.raises(ConfigError, match="`timeout` expected more than zero seconds"):
        fetch_jars(tmp_path, timeout=timedelta(0))


def test_the_apache_kafka_waits_take_a_timedelta_and_the_old_names_warn(tmp_path: Path) -> None:
    kafka = ApacheKafka(tmp_path / "jars", tmp_path / "home")
    kafka.stop_node(0, timeout=timedelta(seconds=5))  # not running: nothing to stop
    with pytest.warns(DeprecationWarning, match="ApacheKafka.stop_node: `timeout_s` is deprec"):
        kafka.stop_node(0, timeout_s=5)
    with pytest.raises(ConfigError, match="ApacheKafka.start: `timeout` expected a datetime"):
        kafka.start(180)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="ApacheKafka.wait_ready: got `timeout` and its old"):
        with pytest.warns(DeprecationWarning):
            kafka.wait_ready(timedelta(seconds=1), timeout_s=1)
