"""Private: validation of ``KafkaSink`` constructor arguments, each named in its message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from thalweg_bytewax.errors import ConfigError

__all__ = ["check_bool", "check_config", "check_interval", "check_names", "check_positive_int"]

_COMPONENT = "kafka sink"


def _refuse(name: str, expected: str, value: object, remedy: str = "") -> ConfigError:
    msg = f"{_COMPONENT}: `{name}` expected {expected}; got {value!r}"
    if remedy:
        msg = f"{msg}; {remedy}"
    return ConfigError(msg)


def check_names(value: object, name: str) -> list[str]:
    """A non-empty list of names from a list or a comma-separated string."""
    expected = "a comma-separated string or a list of non-empty strings"
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        items = [v.strip() for v in value]
    else:
        raise _refuse(name, expected, value)
    items = [v for v in items if v]
    if not items:
        raise _refuse(name, "at least one entry", value)
    return items


def check_bool(value: object, name: str) -> bool:
    """``True`` or ``False``; a string like ``"false"`` is truthy, so it is refused."""
    if not isinstance(value, bool):
        raise _refuse(name, "True or False", value)
    return value


def check_positive_int(value: object, name: str) -> int:
    """An integer >= 1 (not a bool, a float or a numeric string)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _refuse(name, "an integer >= 1", value)
    return value


def check_interval(value: object, name: str) -> float:
    """A positive ``timedelta``, in seconds."""
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise _refuse(name, "a positive datetime.timedelta", value, "e.g. timedelta(seconds=10)")
    return value.total_seconds()


def check_config(value: object, name: str) -> dict[str, Any]:
    """``None`` or a mapping with string keys (librdkafka property names)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        # Name the keys only: the values may hold secrets.
        shown = sorted(map(repr, value)) if isinstance(value, Mapping) else type(value).__name__
        raise _refuse(name, "a mapping of librdkafka property names to values", shown)
    return dict(value)
