"""Private: a JSON-shaped mapping as TOML text (``thalweg config show``).

Bare keys where TOML allows them, strings as JSON quotes them, non-finite floats as
TOML spells them, nested dicts as tables and ``None`` as a comment saying the key is
unset; anything without a TOML form is refused by name.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from thalweg_bytewax.errors import ConfigError

__all__ = ["to_toml", "toml_key", "toml_value"]


def toml_key(key: str) -> str:
    """``key`` as TOML writes it: bare when it can be, else quoted."""
    bare = key.replace("_", "").replace("-", "").isalnum() and key.isascii()
    return key if bare else json.dumps(key)


def toml_value(value: Any) -> str:
    """A JSON-shaped value as TOML (``None`` items of a list or table left out).

    Raises:
        ConfigError: When the value has no TOML form.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("nan" if value != value else "inf")
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        items = ", ".join(
            f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items() if v is not None
        )
        return "{ " + items + " }" if items else "{}"
    msg = f"config show: expected a TOML value; got a {type(value).__name__}"
    raise ConfigError(msg)


def to_toml(values: Mapping[str, Any]) -> str:
    """A JSON-shaped mapping (``model_dump(mode="json")``) as TOML; ``None`` as a comment.

    Args:
        values: The mapping; dicts become tables.

    Returns:
        The TOML text.
    """
    lines: list[str] = []

    def _table(node: Mapping[str, Any], prefix: tuple[str, ...]) -> None:
        for key, value in node.items():
            if value is None:
                lines.append(f"# {toml_key(key)}: unset")
            elif not isinstance(value, dict):
                lines.append(f"{toml_key(key)} = {toml_value(value)}")
        for key, value in node.items():
            if isinstance(value, dict):
                path = (*prefix, key)
                if any(not isinstance(v, dict) for v in value.values()) or not value:
                    lines.extend(["", "[" + ".".join(toml_key(p) for p in path) + "]"])
                _table(value, path)

    _table(values, ())
    return "\n".join(lines).strip("\n") + "\n"
