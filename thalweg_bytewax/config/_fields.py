"""Field types every config model shares: durations, and keys renamed with a warning.

A duration is a :class:`datetime.timedelta` in Python; a TOML file, a variable or a
``--set`` gives it in seconds (``3600``, ``0.5``, ``"3600"``) or as ISO 8601
(``"PT1H"``, ``"P1D"``). Shown (``thalweg config show``, the reference), it is seconds
(see :mod:`thalweg_bytewax.config._duration`).

A key that was renamed keeps working for one release: :func:`renamed_keys` moves its
value to the new key with a :class:`DeprecationWarning` that names both.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from thalweg_bytewax.config._duration import Duration
from thalweg_bytewax.errors import ConfigError

__all__ = ["PositiveDuration", "as_duration", "build_model", "renamed_keys"]

ModelT = TypeVar("ModelT", bound=BaseModel)

PositiveDuration = Annotated[Duration, Field(gt=timedelta(0))]
"""A :data:`Duration` longer than zero."""


def as_duration(value: object, name: str, *, component: str) -> timedelta:
    """``value`` as a ``timedelta``: one already, or seconds (a number that is not a bool).

    For a constructor whose deprecated keyword took seconds (``window_s=3600``).

    Raises:
        ConfigError: Naming ``name`` when ``value`` is neither.
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    msg = f"{component}: `{name}` expected a datetime.timedelta or seconds; got {value!r}"
    raise ConfigError(msg)


def renamed_keys(
    data: Any,
    renames: Mapping[str, str | tuple[str, Callable[[Any], Any]]],
    *,
    where: str,
) -> Any:
    """``data`` (a model's input) with each old key moved to its new name, warning once each.

    Args:
        data: What a ``mode="before"`` model validator receives.
        renames: Old key -> new key, or -> ``(new key, convert)`` when the value changes
            shape too.
        where: Who owns the keys, as the warning names it (``pipeline [dedup]``).

    Returns:
        The input with every old key renamed (a copy when one was).

    Raises:
        ConfigError: When both an old key and its new name are given.
    """
    if not isinstance(data, Mapping) or not any(old in data for old in renames):
        return data
    out = dict(data)
    for old, spec in renames.items():
        if old not in out:
            continue
        new, convert = (spec, None) if isinstance(spec, str) else spec
        if new in out:
            msg = f"{where}: `{old}` is the old name of `{new}`; got both; keep `{new}`"
            raise ConfigError(msg)
        warnings.warn(
            f"{where}: `{old}` is deprecated; write `{new}` (the old name goes in the next "
            "release)",
            DeprecationWarning,
            stacklevel=2,
        )
        value = out.pop(old)
        out[new] = convert(value) if convert is not None else value
    return out


def build_model(model: type[ModelT], component: str, values: Mapping[str, Any]) -> ModelT:
    """``model`` from a constructor's keywords; a refusal as a ``ConfigError`` naming the key.

    Pydantic's own message quotes the input, which may hold a secret: the message here
    names each key and what it expected, never a value.

    Raises:
        ConfigError: ``"<component>: `key` expected …"`` for every refused key.
    """
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False, include_input=False, include_context=False):
            key = ".".join(str(p) for p in error["loc"] if not str(p).startswith("function-"))
            text = str(error["msg"]).removeprefix("Value error, ")
            text = text.removeprefix("Input should be ").removeprefix(f"{component}: ")
            problems.append(f"`{key}` expected {text}" if key else text)
        msg = f"{component}: " + "; ".join(problems)
        raise ConfigError(msg) from None
