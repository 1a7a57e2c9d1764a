"""KafkaSource arguments: every wrong type or value is a ConfigError naming the argument.

A raw ``TypeError`` from deep inside the constructor (or, worse, a wrong value taken as
another: ``True`` as offset 1, ``"false"`` as tail) hides which argument is wrong.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.errors import ConfigError

GOOD: dict[str, Any] = {"brokers": ["localhost:9092"], "topics": ["t"]}


def build(**kwargs: Any) -> KafkaSource:
    args = {**GOOD, **kwargs}
    return KafkaSource(args.pop("brokers"), args.pop("topics"), **args)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"brokers": None}, "brokers"),
        ({"brokers": 9092}, "brokers"),
        ({"brokers": [None]}, "brokers"),
        ({"brokers": [b"localhost:9092"]}, "brokers"),
        ({"topics": None}, "topics"),
        ({"topics": [1]}, "topics"),
        ({"topics": ["orders:3"]}, "topics"),
        ({"topics": {"a": 1}}, "topics"),
        ({"tail": "false"}, "tail"),
        ({"tail": None}, "tail"),
        ({"starting_offset": True}, "starting_offset"),
        ({"starting_offset": False}, "starting_offset"),
        ({"starting_offset": -1}, "starting_offset"),
        ({"starting_offset": 1.5}, "starting_offset"),
        ({"starting_offset": "10"}, "starting_offset"),
        ({"starting_offset": datetime(2024, 1, 1)}, "starting_offset"),  # noqa: DTZ001
        ({"librdkafka": [("a", "b")]}, "librdkafka"),
        ({"librdkafka": {1: "b"}}, "librdkafka"),
        ({"batch_size": "10"}, "batch_size"),
        ({"batch_size": 10.0}, "batch_size"),
        ({"batch_size": True}, "batch_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"max_batch_bytes": "1"}, "max_batch_bytes"),
        ({"max_batch_bytes": 0}, "max_batch_bytes"),
        ({"metadata_prefix": None}, "metadata_prefix"),
        ({"metadata_prefix": "bad-prefix"}, "metadata_prefix"),
        ({"metadata_timeout": 10}, "metadata_timeout"),
        ({"metadata_timeout": timedelta(0)}, "metadata_timeout"),
        ({"max_records_per_s": "5"}, "max_records_per_s"),
        ({"max_records_per_s": True}, "max_records_per_s"),
        ({"max_records_per_s": float("nan")}, "max_records_per_s"),
        ({"max_records_per_s": float("inf")}, "max_records_per_s"),
        ({"max_records_per_s": 0}, "max_records_per_s"),
        ({"partition_check_interval": 30}, "partition_check_interval"),
        ({"partition_check_interval": timedelta(0)}, "partition_check_interval"),
        ({"fail_on_new_partitions": "yes"}, "fail_on_new_partitions"),
    ],
)
def test_each_bad_argument_is_a_config_error_naming_it(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ConfigError, match=rf"kafka source: `{name}`"):
        build(**kwargs)


def test_good_arguments_are_kept() -> None:
    when = datetime(2024, 1, 1, tzinfo=UTC)
    source = build(
        brokers="a:1, b:2",
        topics=("x", "y"),
        tail=False,
        starting_offset=when,
        librdkafka={"fetch.min.bytes": 1},
        batch_size=5,
        max_batch_bytes=1024,
        metadata_timeout=timedelta(seconds=3),
        max_records_per_s=10,
        partition_check_interval=None,
        fail_on_new_partitions=True,
    )
    config = source._config  # the validated configuration is private to the source
    assert config.brokers == ["a:1", "b:2"]
    assert config.topics == ["x", "y"]
    assert (config.tail, config.starting_offset, config.batch_size) == (False, when, 5)
    assert config.max_records_per_s == 10.0
    assert build(starting_offset=0)._config.starting_offset == 0


@given(
    st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=True),
        st.text(max_size=5),
        st.binary(max_size=5),
        st.lists(st.integers(), max_size=2),
        st.integers(max_value=-1),
    )
)
def test_any_non_offset_starting_offset_is_refused(value: Any) -> None:
    if value in ("earliest", "latest"):
        return
    with pytest.raises(ConfigError, match=r"kafka source: `starting_offset`"):
        build(starting_offset=value)


@given(st.one_of(st.none(), st.booleans(), st.floats(), st.text(max_size=5), st.integers(max_value=0)))
def test_any_non_positive_integer_batch_size_is_refused(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"kafka source: `batch_size`"):
        build(batch_size=value)
