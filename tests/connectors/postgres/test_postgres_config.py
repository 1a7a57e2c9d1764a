"""A PostgreSQL sink's settings are one frozen model; its DSN is a secret everywhere shown."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from thalweg_bytewax.config import load_config
from thalweg_bytewax.connectors.postgres import PostgresSink, PostgresSinkConfig

DSN = "postgresql://app:hunter2@db.example/shop"


def test_the_keywords_build_the_model_the_environment_builds() -> None:
    sink = PostgresSink(DSN, "orders", schema="sales", retry_backoff=timedelta(seconds=2), shards=4)
    env = {
        "THALWEG_DSN": DSN,
        "THALWEG_TABLE": "orders",
        "THALWEG_SCHEMA": "sales",
        "THALWEG_RETRY_BACKOFF": "2",
        "THALWEG_SHARDS": "4",
    }
    assert load_config(PostgresSinkConfig, env=env) == sink.config
    assert sink.config.db_schema == "sales"
    assert sink.config.retry_backoff == timedelta(seconds=2)


def test_the_password_is_in_no_repr_str_or_dump(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        sink = PostgresSink(DSN, "orders")
    shown = [repr(sink), str(sink), repr(sink.config), str(sink.config)]
    shown.append(str(sink.config.model_dump(mode="json")))
    shown.extend(r.getMessage() for r in caplog.records)
    assert not [text for text in shown if "hunter2" in text]
    assert sink.pg.dsn == DSN  # resolved where it is used


@pytest.mark.parametrize(
    ("old", "new", "value"),
    [
        ("retry_backoff_s", "retry_backoff", 0.25),
        ("max_backoff_s", "max_backoff", 3.0),
        ("connect_timeout_s", "connect_timeout", 7.0),
    ],
)
def test_a_duration_in_seconds_still_works_with_a_deprecation_warning(
    old: str, new: str, value: float
) -> None:
    with pytest.warns(DeprecationWarning, match=f"`{old}` is deprecated; pass `{new}="):
        keywords: dict[str, Any] = {old: value}
        sink = PostgresSink(DSN, "orders", **keywords)
    assert getattr(sink.config, new) == timedelta(seconds=value)


def test_a_refused_dsn_is_named_without_its_value() -> None:
    with pytest.raises(Exception, match="postgres sink: `dsn`: expected a libpq URI") as info:
        PostgresSink("hunter2-no-uri", "orders")
    assert "hunter2" not in str(info.value)


def test_the_tcp_bounds_join_a_dsn_of_either_form_without_overriding_it() -> None:
    from thalweg_bytewax.connectors.postgres._deadline import tcp_bounds, with_tcp_bounds

    params = tcp_bounds(timedelta(seconds=30), timedelta(seconds=10))
    uri = with_tcp_bounds("postgresql://db/shop?keepalives_idle=9", params)
    assert "keepalives_idle=9" in uri and "keepalives_idle=15" not in uri
    assert "&tcp_user_timeout=30000" in uri and "&connect_timeout=10" in uri
    assert with_tcp_bounds("postgresql://db/shop", params).startswith("postgresql://db/shop?")
    kv = with_tcp_bounds("host=db dbname=shop keepalives=0", params)
    assert kv.startswith("host=db dbname=shop keepalives=0 ") and " keepalives=1" not in kv
    assert "tcp_user_timeout=30000" in kv
