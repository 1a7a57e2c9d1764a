"""A public duration keyword is a timedelta; its old name in seconds warns and lands on it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from thalweg_bytewax.config import UNSET, duration_keyword
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.testing import MockCluster


def test_the_new_keyword_the_old_one_and_the_default() -> None:
    def bound(new: object = UNSET, old: object = UNSET) -> float:
        return duration_keyword("f", "wait", new, "wait_s", old, default=timedelta(seconds=3))  # type: ignore[arg-type]

    assert bound(timedelta(minutes=1)) == 60.0
    assert bound() == 3.0
    with pytest.warns(DeprecationWarning, match=r"f: `wait_s` is deprecated; pass `wait=timedelta"):
        assert bound(old=2.5) == 2.5
    with pytest.warns(DeprecationWarning), pytest.raises(ConfigError, match="keep `wait`"):
        bound(timedelta(seconds=1), 1)
    with pytest.raises(ConfigError, match=r"`wait` expected a datetime.timedelta; got 5; e\.g\."):
        bound(5)
    with pytest.raises(ConfigError, match="`wait` expected more than zero seconds; got -1"):
        bound(timedelta(seconds=-1))
    with pytest.warns(DeprecationWarning), pytest.raises(ConfigError, match="`wait_s` expected a"):
        bound(old="5")


def test_zero_is_a_value_only_where_allowed_and_a_required_one_is_named() -> None:
    assert duration_keyword("f", "wait", timedelta(0), "wait_s", UNSET, zero=True) == 0.0
    with pytest.raises(ConfigError, match="`wait` expected more than zero seconds; got 0"):
        duration_keyword("f", "wait", timedelta(0), "wait_s", UNSET)
    with pytest.raises(ConfigError, match=r"f: `wait` is required; e\.g\. wait=timedelta"):
        duration_keyword("f", "wait", UNSET, "wait_s", UNSET)


def test_the_warning_points_at_the_callers_line() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        MockCluster(start_timeout_s=5)
    assert caught[0].filename == __file__


def test_the_mock_cluster_start_timeout_is_a_timedelta() -> None:
    assert MockCluster(start_timeout=timedelta(seconds=5))._timeout == 5.0
    assert MockCluster()._timeout == 30.0
    with pytest.warns(DeprecationWarning, match="MockCluster: `start_timeout_s` is deprecated"):
        assert MockCluster(start_timeout_s=5)._timeout == 5.0
    with pytest.raises(ConfigError, match="MockCluster: `start_timeout` expected a datetime"):
        MockCluster(start_timeout=5)  # type: ignore[arg-type]
