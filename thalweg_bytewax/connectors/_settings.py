"""Settings several connectors' models share: the metadata prefix, a path's location."""

from __future__ import annotations

import os
from typing import Annotated, Any

from pydantic import AfterValidator

from thalweg_bytewax.records.metadata import MetadataColumns

__all__ = ["MetadataPrefix", "as_location"]


def _checked(value: str) -> str:
    MetadataColumns(value)  # a ConfigError (a ValueError) naming what it expected
    return value


MetadataPrefix = Annotated[str, AfterValidator(_checked)]
"""The prefix of the metadata columns (``_twg_``): one that makes valid column names."""


def as_location(value: Any, expected: str) -> Any:
    """A ``path`` setting as text (an ``os.PathLike`` too), for a ``mode="before"`` validator.

    Raises:
        ValueError: ``"expected <expected>; got ..."`` for a value that is no path.
    """
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if not isinstance(value, str):
        msg = f"expected {expected}; got {value!r}"
        raise ValueError(msg)  # noqa: TRY004 - pydantic reports ValueError by key
    return value
