"""One check for every public argument that takes an enum or a fixed set of strings.

A misspelt choice (``mode="strcit"``) is a :class:`~thalweg_bytewax.ConfigError` that
names the component and the argument and lists the valid values, wherever it is passed.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import TypeVar

from thalweg_bytewax.errors import ConfigError

__all__ = ["check_choice", "parse_enum"]

_E = TypeVar("_E", bound=Enum)
"""The enum an argument is parsed into."""


def _listed(values: Iterable[object]) -> str:
    shown = [f"`{v}`" for v in values]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def parse_enum(kind: type[_E], value: object, *, where: str, argument: str) -> _E:
    """``value`` as a member of ``kind`` (a member or its value).

    Args:
        kind: The enum class, e.g. ``ContractMode``.
        value: What the caller passed.
        where: The component, e.g. ``"validate `orders`"``.
        argument: The argument name, e.g. ``"mode"``.

    Returns:
        The member.

    Raises:
        ConfigError: ``{where}: expected {argument} `a`, `b` or `c`; got {value!r}``.
    """
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except (ValueError, TypeError):  # TypeError: an unhashable value
        pass
    msg = f"{where}: expected {argument} {_listed(m.value for m in kind)}; got {value!r}"
    raise ConfigError(msg)


def check_choice(value: object, choices: Iterable[str], *, where: str, argument: str) -> str:
    """``value`` if it is one of ``choices`` (for ``Literal[...]`` string arguments).

    Raises:
        ConfigError: ``{where}: expected {argument} `a`, `b` or `c`; got {value!r}``.
    """
    allowed = tuple(choices)
    if isinstance(value, str) and value in allowed:
        return value
    msg = f"{where}: expected {argument} {_listed(allowed)}; got {value!r}"
    raise ConfigError(msg)
