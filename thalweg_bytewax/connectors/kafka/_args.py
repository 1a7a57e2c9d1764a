"""Private: validation of ``KafkaSource`` and ``KafkaSink`` constructor arguments.

Each check names the argument and what it expected, so a wrong value fails at
construction with a :class:`~thalweg_bytewax.errors.ConfigError` instead of a raw
``TypeError`` deep inside, or worse, being taken for another value (``True`` is an
``int`` in Python, so it would otherwise read as offset 1).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from thalweg_bytewax.errors import ConfigError

__all__ = [
    "check_bool",
    "check_config",
    "check_interval",
    "check_optional_interval",
    "check_names",
    "check_positive_int",
    "check_rate",
    "check_starting_offset",
    "librdkafka_keyword",
]

_SOURCE = "kafka source"


def _refuse(
    name: str, expected: str, value: object, remedy: str = "", *, component: str = _SOURCE
) -> ConfigError:
    msg = f"{component}: `{name}` expected {expected}; got {value!r}"
    if remedy:
        msg = f"{msg}; {remedy}"
    return ConfigError(msg)


def check_names(
    value: object, name: str, *, forbid: str = "", component: str = _SOURCE
) -> list[str]:
    """A non-empty list of names from a list or a comma-separated string."""
    expected = "a comma-separated string or a list of non-empty strings"
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        if not all(isinstance(v, str) for v in value):
            raise _refuse(name, expected, value, component=component)
        items = [v.strip() for v in value]
    else:
        raise _refuse(name, expected, value, component=component)
    items = [v for v in items if v]
    if not items:
        raise _refuse(name, "at least one entry", value, component=component)
    for item in items:
        if forbid and any(c in item for c in forbid):
            expected = f"names without {forbid!r} (Kafka refuses them)"
            raise _refuse(name, expected, item, component=component)
    return items


def check_bool(value: object, name: str, *, component: str = _SOURCE) -> bool:
    """``True`` or ``False``; a string like ``"false"`` is truthy, so it is refused."""
    if not isinstance(value, bool):
        raise _refuse(name, "True or False", value, component=component)
    return value


def check_positive_int(value: object, name: str, *, component: str = _SOURCE) -> int:
    """An integer >= 1 (not a bool, a float or a numeric string)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _refuse(name, "an integer >= 1", value, component=component)
    return value


def check_rate(value: object, name: str) -> float | None:
    """``None`` or a finite number > 0."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise _refuse(name, "None or a finite number > 0", value)
    return float(value)


def check_interval(value: object, name: str, *, component: str = _SOURCE) -> float:
    """A positive ``timedelta``, in seconds."""
    if not isinstance(value, timedelta) or value <= timedelta(0):
        remedy = "e.g. timedelta(seconds=10)"
        raise _refuse(name, "a positive datetime.timedelta", value, remedy, component=component)
    return value.total_seconds()


def check_optional_interval(value: object, name: str) -> float | None:
    """``None`` or a positive ``timedelta``, in seconds."""
    if value is None:
        return None
    if not isinstance(value, timedelta) or value <= timedelta(0):
        expected = "a positive datetime.timedelta or None"
        raise _refuse(name, expected, value, "e.g. timedelta(seconds=30)")
    return value.total_seconds()


def check_config(value: object, name: str, *, component: str = _SOURCE) -> dict[str, Any]:
    """``None`` or a mapping with string keys (librdkafka property names)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        # Name the keys only: the values may hold secrets.
        shown = sorted(map(repr, value)) if isinstance(value, Mapping) else type(value).__name__
        expected = "a mapping of librdkafka property names to values"
        raise _refuse(name, expected, shown, component=component)
    return dict(value)


def check_starting_offset(value: object, name: str) -> str | int | datetime:
    """``"earliest"``, ``"latest"``, an integer offset >= 0 or a tz-aware datetime."""
    expected = "'earliest', 'latest', an integer offset >= 0 or a timezone-aware datetime"
    if isinstance(value, str) and value in ("earliest", "latest"):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise _refuse(name, expected, value, "add a timezone, e.g. tzinfo=UTC")
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise _refuse(name, expected, value)


def librdkafka_keyword(
    librdkafka: Mapping[str, Any] | None,
    add_config: Mapping[str, Any] | None,
    *,
    component: str = _SOURCE,
) -> Mapping[str, Any] | None:
    """The ``librdkafka`` keyword, or its deprecated old name ``add_config`` (which warns).

    The warning points at the code that built the connector (two frames up).

    Raises:
        ConfigError: When both names are passed.
    """
    if add_config is None:
        return librdkafka
    warnings.warn(
        f"{component}: `add_config` is deprecated; pass `librdkafka` (the old name goes in "
        "the next release)",
        DeprecationWarning,
        stacklevel=3,
    )
    if librdkafka is not None:
        msg = f"{component}: got `librdkafka` and its old name `add_config`; keep one"
        raise ConfigError(msg)
    return add_config
