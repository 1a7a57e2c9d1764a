"""Private: ``KafkaSource``'s keywords, each checked by name, as its ``KafkaSourceConfig``.

A TOML file is read by the configuration model itself; Python keywords are held to a
stricter standard here first, so a wrong type names its argument instead of surfacing as
a raw ``TypeError`` later or being read as another value (``True`` as offset 1, ``30``
as a duration).
"""

from __future__ import annotations

from datetime import timedelta

from thalweg_bytewax.config import SecretRef
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import metadata_columns

from ._args import (
    check_bool,
    check_config,
    check_interval,
    check_names,
    check_optional_interval,
    check_positive_int,
    check_rate,
    check_starting_offset,
)
from ._config import DEFAULT_PREFETCH_BUDGET, DEFAULT_UNREACHABLE_TIMEOUT
from .config import KafkaSourceConfig

__all__ = ["source_config"]

_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


def source_config(  # noqa: PLR0913 - every keyword of KafkaSource, checked by name
    brokers: object,
    topics: object,
    *,
    tail: object,
    starting_offset: object,
    librdkafka: object,
    password: object,
    batch_size: object,
    max_batch_bytes: object,
    metadata_prefix: object,
    metadata_timeout: object,
    max_records_per_s: object,
    partition_check_interval: object,
    fail_on_new_partitions: object,
    isolation_level: object = "read_committed",
    prefetch_budget: object = DEFAULT_PREFETCH_BUDGET,
    unreachable_timeout: object = DEFAULT_UNREACHABLE_TIMEOUT,
) -> KafkaSourceConfig:
    """Check every keyword of ``KafkaSource`` by name and build its :class:`KafkaSourceConfig`.

    Stricter than a TOML file: a wrong type must not surface as a raw ``TypeError``
    later, nor be read as another value (``True`` as offset 1, ``30`` as a duration).

    Raises:
        ConfigError: On an invalid argument, naming it.
    """
    # Checked in the order of the signature, so the first wrong argument is named.
    brokers_ = check_names(brokers, "brokers")
    # ":" separates topic and partition in partition keys; Kafka refuses it anyway.
    topics_ = check_names(topics, "topics", forbid=":")
    tail_ = check_bool(tail, "tail")
    start = check_starting_offset(starting_offset, "starting_offset")
    settings = check_config(librdkafka, "librdkafka")
    if password is not None and not isinstance(password, str | SecretRef):
        msg = f"kafka source: `password` expected a string or a SecretRef; got {type(password)}"
        raise ConfigError(msg)
    batch_size_ = check_positive_int(batch_size, "batch_size")
    max_batch_bytes_ = check_positive_int(max_batch_bytes, "max_batch_bytes")
    metadata_columns(metadata_prefix, "kafka source")
    timeout = check_interval(metadata_timeout, "metadata_timeout")
    rate = check_rate(max_records_per_s, "max_records_per_s")
    check_optional_interval(partition_check_interval, "partition_check_interval")
    fail_on_new = check_bool(fail_on_new_partitions, "fail_on_new_partitions")
    if isolation_level not in _ISOLATION_LEVELS:
        msg = (
            f"kafka source: `isolation_level` expected one of {', '.join(_ISOLATION_LEVELS)}; "
            f"got {isolation_level!r}"
        )
        raise ConfigError(msg)
    budget = (
        None if prefetch_budget is None else check_positive_int(prefetch_budget, "prefetch_budget")
    )
    check_optional_interval(unreachable_timeout, "unreachable_timeout")
    values = {
        "brokers": brokers_,
        "topics": topics_,
        "tail": tail_,
        "starting_offset": start,
        "librdkafka": settings,
        "password": password,
        "batch_size": batch_size_,
        "max_batch_bytes": max_batch_bytes_,
        "metadata_prefix": str(metadata_prefix),
        "metadata_timeout": timedelta(seconds=timeout),
        "max_records_per_s": rate,
        "partition_check_interval": partition_check_interval,
        "fail_on_new_partitions": fail_on_new,
        "isolation_level": isolation_level,
        "prefetch_budget": budget,
        "unreachable_timeout": unreachable_timeout,
    }
    return KafkaSourceConfig.build(values)
