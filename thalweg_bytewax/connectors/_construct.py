"""How a connector's ``from_config`` builds it: set up from a validated model, not its keywords.

A connector's ``__init__`` takes one keyword per setting, checks each and builds its
configuration model, then hands the model to a private ``_start`` that does the rest. A
``from_config`` already holds the model: :func:`construct` makes the instance without
running ``__init__`` and hands the model (and any object beside it) to ``_start``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

__all__ = ["construct"]

_T = TypeVar("_T")
"""The connector class built."""

_P = ParamSpec("_P")
"""What its ``_start`` takes after the instance: the model, then the objects beside it."""


def construct(
    cls: type[_T],
    start: Callable[Concatenate[_T, _P], None],
    /,
    *args: _P.args,
    **kwargs: _P.kwargs,
) -> _T:
    """An instance of ``cls`` set up by ``start`` instead of ``__init__``.

    Args:
        cls: The connector class (a subclass, when ``from_config`` is called on one).
        start: The class's ``_start``: sets the instance up from its model.
        *args: What ``start`` takes after the instance.
        **kwargs: What ``start`` takes by keyword.

    Returns:
        The instance, set up.
    """
    instance = cls.__new__(cls)
    start(instance, *args, **kwargs)
    return instance
