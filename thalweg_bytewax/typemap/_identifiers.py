"""Identifier validation for table, schema and column names.

Validation decides which names are acceptable; quoting stays with the driver
(psycopg ``sql.Identifier``, pyiceberg's name API). No DDL is ever built by pasting a
name into text, validated or not.
"""

from __future__ import annotations

import re
from typing import Literal

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.typemap._canonical import Target

__all__ = ["MAX_IDENTIFIER_BYTES", "IdentifierMode", "validate_identifier"]

IdentifierMode = Literal["strict", "relaxed"]
"""``strict``: lowercase letters, digits, underscores; ``relaxed``: any text, quoted."""

MAX_IDENTIFIER_BYTES = 63
"""PostgreSQL's NAMEDATALEN - 1: longer names are silently truncated by the server, so
two long names could collide; they are refused instead."""

_STRICT = re.compile(r"[a-z_][a-z0-9_]*")

_LENGTH_REASON: dict[str | None, str] = {
    "postgres": "PostgreSQL would truncate it silently",
    "iceberg": "Iceberg names are kept within the limit every thalweg target shares, so "
    "a table's names stay valid wherever it is copied",
    None: "names are kept within the limit every thalweg target shares, so a table's "
    "names stay valid wherever it is copied",
}


def validate_identifier(
    name: object,
    *,
    mode: IdentifierMode = "strict",
    what: str = "column",
    target: Target | None = None,
    relaxable: bool = True,
) -> str:
    """Return ``name`` when it is an acceptable identifier, else raise naming it.

    Args:
        name: The candidate name.
        mode: ``"strict"`` accepts ``[a-z_][a-z0-9_]*``, names that need no quoting
            anywhere; ``"relaxed"`` accepts any non-empty text without NUL or
            surrogates, which the driver quotes.
        what: What the name is, for the message (``"column"``, ``"table"``).
        target: The system the name is for, so the message gives that system's reason
            for the length limit; None for a message that names no system.
        relaxable: Whether the caller offers ``identifiers="relaxed"`` for this name;
            when False a strict refusal advises renaming only.

    Returns:
        ``name`` unchanged.

    Raises:
        ConfigError: The name is not a string, is empty, holds NUL, is longer than
            :data:`MAX_IDENTIFIER_BYTES` UTF-8 bytes, or fails the strict pattern.
    """
    if mode not in ("strict", "relaxed"):
        msg = f"identifiers: expected mode 'strict' or 'relaxed'; got {mode!r}"
        raise ConfigError(msg)
    if not isinstance(name, str):
        msg = f"identifiers: {what} name expected a str; got {type(name).__name__}"
        raise ConfigError(msg)
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        size = -1
    if size < 0 or not name or "\x00" in name:
        msg = (
            f"identifiers: {what} name {name!r} expected non-empty UTF-8 text without NUL; "
            f"rename the {what}"
        )
        raise ConfigError(msg)
    if size > MAX_IDENTIFIER_BYTES:
        msg = (
            f"identifiers: {what} name {name[:20]!r}... expected at most "
            f"{MAX_IDENTIFIER_BYTES} UTF-8 bytes; got {size}; shorten it "
            f"({_LENGTH_REASON[target]})"
        )
        raise ConfigError(msg)
    if mode == "strict" and not _STRICT.fullmatch(name):
        advice = (
            'rename it, or pass identifiers="relaxed" to have it quoted'
            if relaxable
            else f"rename it ({what} names are always checked strictly, whatever "
            f"`identifiers` says)"
        )
        msg = (
            f"identifiers: {what} name {name!r} expected lowercase letters, digits and "
            f"underscores, not starting with a digit; {advice}"
        )
        raise ConfigError(msg)
    return name
