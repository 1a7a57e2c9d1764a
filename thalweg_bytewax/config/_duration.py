"""``Duration``: a length of time, a ``timedelta`` in Python, seconds or ISO-8601 in TOML.

Every config model's durations are this type (a connector's, a pipeline section's, a
flow's settings): a TOML file, a variable or a ``--set`` gives seconds (``3600``,
``0.5``, ``"3600"``) or ISO-8601 (``"PT1H"``, ``"P1D"``); ``thalweg config show``, the
starter file and the reference write seconds.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PlainSerializer, TypeAdapter

__all__ = ["Duration", "PositiveDuration", "seconds"]

_LAX = TypeAdapter(timedelta)
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _coerce(value: Any) -> Any:
    """A number of seconds (also as text, as a variable or ``--set`` gives it) as a timedelta.

    ISO-8601 text (``PT1M30S``) is read too; a ``timedelta`` passes as it is; a boolean
    is refused rather than read as 0 or 1 second.
    """
    if isinstance(value, bool):
        msg = f"expected a duration (seconds, or ISO-8601 such as 'PT30S'); got {value!r}"
        raise ValueError(msg)  # noqa: TRY004 - pydantic reports ValueError by key
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        return timedelta(seconds=float(value))
    if isinstance(value, str):  # ISO-8601, read here so strict validation takes it too
        return _LAX.validate_python(value)
    return value


def seconds(value: timedelta) -> float:
    """``value`` in seconds, as TOML and ``thalweg config show`` write a duration."""
    return value.total_seconds()


Duration = Annotated[
    timedelta,
    BeforeValidator(_coerce),
    PlainSerializer(seconds, return_type=float, when_used="json"),
]
"""A length of time: a ``timedelta`` in Python; in TOML, a variable or ``--set``, a number
of seconds (``2.5``) or ISO-8601 text (``"PT2.5S"``, ``"PT1M"``). Shown as seconds."""

PositiveDuration = Annotated[Duration, Field(gt=timedelta(0))]
"""A :data:`Duration` longer than zero."""
