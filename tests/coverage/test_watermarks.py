"""``kafka_watermarks`` asks the brokers for each partition's bounds, each request bounded."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from thalweg_bytewax.coverage.report import kafka_watermarks
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.testing import produce


def test_the_watermarks_of_a_partition_and_the_old_timeout_name_warns(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x", "partition": 0}] * 3)
    expected = {(topic, 0): (0, 3)}
    assert (
        kafka_watermarks(kafka_bootstrap, [(topic, 0)], timeout=timedelta(seconds=10)) == expected
    )
    assert kafka_watermarks(kafka_bootstrap, [(topic, 0)]) == expected  # default bound: 10 s
    with pytest.warns(
        DeprecationWarning, match="`timeout_s` is deprecated; pass `timeout=timedelta"
    ):
        assert kafka_watermarks(kafka_bootstrap, [(topic, 0)], timeout_s=10) == expected


def test_a_timeout_that_is_no_duration_is_refused_before_asking() -> None:
    with pytest.raises(
        ConfigError, match="kafka_watermarks: `timeout` expected a datetime.timedelta"
    ):
        kafka_watermarks("localhost:1", [("t", 0)], timeout=10)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="`timeout` expected more than zero seconds; got 0"):
        kafka_watermarks("localhost:1", [("t", 0)], timeout=timedelta(0))
