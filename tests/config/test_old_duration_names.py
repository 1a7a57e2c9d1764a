"""Every duration of a pipeline has one name and is a timedelta; its old name in seconds warns.

``[[windows]]`` ``size_s`` ... ``allowed_skew_s``, ``[sql] timeout_s``,
``[observability.otlp]`` ``timeout_s`` and ``metric_export_interval_s``, the orders flow's
``window_lateness_s``: each still loads for one release, with a ``DeprecationWarning``
naming the new key, and lands on it as the same duration; the new name takes seconds or
ISO-8601; a bad value is a ``ConfigError`` naming the key.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from thalweg_bytewax.config import load_config
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.flows.orders import OrdersSettings
from thalweg_bytewax.pipeline import PipelineConfig

BASE = """
name = "durations"
[sql]
nodes = [{{ name = "orders", query = "SELECT * FROM input", sink = "orders" }}]
{sql}
[[windows]]
name = "revenue"
from = "orders"
time_column = "created_at"
aggs = {{ n = ["count", "*"] }}
{window}
[observability.otlp]
{otlp}
"""


def _load(tmp_path: Path, *, sql: str = "", window: str = "size = 60", otlp: str = "") -> Any:
    file = tmp_path / "pipeline.toml"
    file.write_text(BASE.format(sql=sql, window=window, otlp=otlp), encoding="utf-8")
    return PipelineConfig.load(file, env={})


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ("size_s = 60", ("windows", "size"), "pipeline window `revenue`"),
        ('kind = "sliding"\nlength_s = 60\nstep = 20', ("windows", "length"), "window"),
        ('kind = "sliding"\nlength = 60\nstep_s = 60', ("windows", "step"), "window"),
        ('kind = "session"\ngap_s = 60', ("windows", "gap"), "window"),
        ("size = 5\nallowed_lateness_s = 60", ("windows", "allowed_lateness"), "window"),
        ("size = 5\nallowed_skew_s = 60", ("windows", "allowed_skew"), "window"),
        ("[sql]\ntimeout_s = 60", ("sql", "timeout"), "pipeline [sql]"),
        ("timeout_s = 60", ("otlp", "timeout"), "[observability.otlp]"),
        ("metric_export_interval_s = 60", ("otlp", "metric_export_interval"), "otlp"),
    ],
)
def test_an_old_name_warns_naming_the_new_and_lands_on_it(
    tmp_path: Path, old: str, new: tuple[str, str], where: str
) -> None:
    section, key = new
    old_key = old.split("_s = ")[0].split("\n")[-1] + "_s"
    if section == "sql":
        # `[sql] timeout_s` sits in the [sql] table the base file opens.
        kwargs = {"sql": old.removeprefix("[sql]\n")}
    elif section == "otlp":
        kwargs = {"otlp": old}
    else:
        kwargs = {"window": old}
    with pytest.warns(
        DeprecationWarning, match=rf"{re.escape(where)}.*`{old_key}` is deprecated; write `{key}`"
    ):
        config = _load(tmp_path, **kwargs)
    holder = {
        "windows": lambda: config.windows[0],
        "sql": lambda: config.sql,
        "otlp": lambda: config.observability.otlp,
    }[section]()
    assert getattr(holder, key) == timedelta(seconds=60)


def test_iso_8601_and_seconds_build_the_same_window(tmp_path: Path) -> None:
    iso = _load(tmp_path, window='size = "PT1M"\nallowed_lateness = "PT10S"').windows[0]
    secs = _load(tmp_path, window="size = 60\nallowed_lateness = 10").windows[0]
    assert iso == secs
    assert (secs.size, secs.allowed_lateness) == (timedelta(minutes=1), timedelta(seconds=10))


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"window": 'size = "a minute"'}, "`windows[0].size`"),
        ({"sql": 'timeout = "soon"'}, "`sql.timeout`"),
        ({"sql": "timeout = 0"}, "`sql.timeout`"),
        (
            {"otlp": 'metric_export_interval = "often"'},
            "`observability.otlp.metric_export_interval`",
        ),
        ({"otlp": "timeout = -1"}, "`observability.otlp.timeout`"),
    ],
)
def test_a_bad_duration_is_a_config_error_naming_the_key(
    tmp_path: Path, kwargs: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(named)):
        _load(tmp_path, **kwargs)


def test_both_names_at_once_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="`size_s` is the old name of `size`; got both"):
        _load(tmp_path, window="size = 60\nsize_s = 60")


def test_the_orders_flow_window_lateness_is_a_duration_and_its_old_name_warns() -> None:
    with pytest.warns(DeprecationWarning, match="`window_lateness_s` is deprecated"):
        old = load_config(OrdersSettings, env={"THALWEG_WINDOW_LATENESS_S": "120"})
    new = load_config(OrdersSettings, env={"THALWEG_WINDOW_LATENESS": "PT2M"})
    assert old.window_lateness == new.window_lateness == timedelta(minutes=2)
    (window,) = new.pipeline().windows
    assert window.allowed_lateness == timedelta(minutes=2)
