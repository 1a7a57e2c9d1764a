"""Private: a config model's ``ValidationError`` as one message that names the place to fix.

Each bad key is named by where it was set (``a.b`` in a TOML file, the ``THALWEG_*``
variable, the ``--set`` flag), with what was expected in plain words (durations as
seconds) and what was got, never a secret's value: a secret setting, an unknown place or
a whole table is shown as not shown. Pydantic's union tags and validator names are
stripped from a key path; an unknown key lists the keys the table takes.
"""

from __future__ import annotations

import re
import typing
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretBytes, SecretStr, ValidationError

from thalweg_bytewax.config._layers import (
    Layer,
    annotation_at,
    env_name,
    submodel,
    submodels,
    union_tag,
)
from thalweg_bytewax.config._secret import SecretRef

__all__ = [
    "SECRET_TYPES",
    "component_name",
    "key_origin",
    "key_subject",
    "mentions",
    "validation_message",
]

SECRET_TYPES = (SecretStr, SecretBytes, SecretRef)
"""The types whose values no message shows."""
_GOT_LIMIT = 80


def component_name(model: type[BaseModel]) -> str:
    """How messages name ``model``'s settings: its ``component``, else its class name."""
    return str(getattr(model, "component", model.__name__))


def key_origin(layers: list[Layer], path: tuple[str, ...]) -> tuple[str, str] | None:
    """``(kind, origin)`` of the layer that last set ``path`` or a table holding it."""
    for layer in reversed(layers):
        for end in range(len(path), 0, -1):
            if path[:end] in layer.origins:
                return layer.kind, layer.origins[path[:end]]
    return None


def _dotted(path: tuple[str | int, ...]) -> str:
    """A key path as written in a message: ``windows[0].size_s``, ``sinks.orders.dsn``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def key_subject(path: tuple[str | int, ...], where: tuple[str, str] | None) -> str:
    """How a message names a key: ``"`a.b` in `f.toml`"``, ``"`THALWEG_A__B`"``, ..."""
    dotted = _dotted(path)
    if where is None:
        return f"`{dotted}`"
    kind, origin = where
    if kind == "file":
        return f"`{dotted}` {origin}"
    if kind == "env" and origin != f"`{env_name(_names(path))}`":
        return f"{origin} (`{dotted}`)"
    return origin


def _names(path: tuple[str | int, ...]) -> tuple[str, ...]:
    """The key names of ``path`` (list indices left out), as the layers record origins."""
    return tuple(p for p in path if isinstance(p, str))


def _lookup(values: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        if isinstance(part, int) and isinstance(values, list) and 0 <= part < len(values):
            values = values[part]
        elif isinstance(values, dict) and part in values:
            values = values[part]
        else:
            return None
    return values


def mentions(annotation: Any, kinds: tuple[type, ...]) -> bool:
    """Whether ``annotation`` is, or holds anywhere in its arguments, one of ``kinds``."""
    if isinstance(annotation, type) and issubclass(annotation, kinds):
        return True
    return any(mentions(arg, kinds) for arg in typing.get_args(annotation))


def _got(model: type[BaseModel], path: tuple[str | int, ...], values: Any) -> str:
    annotation = annotation_at(model, path)
    if annotation is None or mentions(annotation, SECRET_TYPES):
        # An unknown place (or a whole table) may hold a secret: show none of it.
        return "a secret value (not shown)" if annotation is not None else "a value not shown"
    value = _lookup(values, path)
    if isinstance(value, dict | list):  # a section: its keys may include secrets
        return f"a {'table' if isinstance(value, dict) else 'list'} (not shown)"
    text = repr(value)
    return text if len(text) <= _GOT_LIMIT else text[: _GOT_LIMIT - 1] + "…"


def validation_message(
    model: type[BaseModel],
    exc: ValidationError,
    values: dict[str, Any],
    layers: list[Layer],
    file: str | Path | None,
) -> str:
    """``exc`` as one message: per bad key, where it was set, what was expected, got what.

    Args:
        model: The model that failed to validate.
        exc: Pydantic's error.
        values: The merged values of ``layers``, as validated.
        layers: The file, variables and overrides, in order.
        file: The TOML file, if any.
    """
    problems = []
    for error in exc.errors():
        loc, chosen = _untagged(model, tuple(error["loc"]))
        path = _known_prefix(model, loc)
        if error["type"] == "extra_forbidden":
            path = (*path, *loc[len(path) : len(path) + 1])
        where = key_origin(layers, _names(path))
        if not path:
            problems.append(_expectation(error))
        elif error["type"] == "missing":
            var = env_name(_names(path))
            if file is None:
                problems.append(f"`{var}` is required; set it")
            elif len(_names(path)) != len(path):  # inside a list: no variable sets it alone
                problems.append(f"`{_dotted(path)}` is required; add it to `{file}`")
            else:
                dotted = _dotted(path)
                problems.append(f"`{dotted}` is required; add it to `{file}` or set `{var}`")
        elif error["type"] == "extra_forbidden":
            parent = chosen.get(path[:-1]) or (
                submodel(annotation_at(model, path[:-1])) if path[:-1] else model
            )
            fields = parent.model_fields.items() if parent else ()
            known = ", ".join(f"`{info.alias or k}`" for k, info in fields)
            problems.append(f"{key_subject(path, where)}: unknown key; expected one of {known}")
        elif error["type"] == "value_error":
            # A validator's own message: says what was expected and got, quoting no secret.
            problems.append(f"{key_subject(path, where)}: {_expectation(error)}")
        else:
            got = _got(model, path, values)
            problems.append(
                f"{key_subject(path, where)}: expected {_expectation(error)}; got {got}"
            )
    joined = "; ".join(problems)
    remedy = "fix each value named, or remove it for the default"
    return f"`{component_name(model)}` settings: {joined}; {remedy}"


def _untagged(
    model: type[BaseModel], loc: tuple[Any, ...]
) -> tuple[tuple[Any, ...], dict[tuple[Any, ...], type[BaseModel]]]:
    """``loc`` without the tags pydantic puts after a union of models (``source.kafka.x``).

    Returns:
        The location as keys, and per union's path the member its tag chose.
    """
    kept: list[Any] = []
    chosen: dict[tuple[Any, ...], type[BaseModel]] = {}
    for part in loc:
        members = submodels(annotation_at(model, kept)) if kept else []
        if len(members) > 1 and isinstance(part, str):
            tagged = [m for m in members if union_tag(m) == part]
            if tagged:
                chosen[tuple(kept)] = tagged[0]
                continue
        kept.append(part)
    return tuple(kept), chosen


def _known_prefix(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[str | int, ...]:
    """``loc`` cut to the keys the model declares, stepping into lists and tables.

    Pydantic appends union member tags and validator names after the real keys; they
    are cut off here.
    """
    kept: list[str | int] = []
    for part in loc:
        if not isinstance(part, str | int) or annotation_at(model, (*kept, part)) is None:
            break
        kept.append(part)
    return tuple(kept)


_TIMEDELTA = re.compile(r"datetime\.timedelta\(([^()]*)\)")


def _seconds_of(args: str) -> float:
    """The seconds of ``timedelta``'s repr arguments (``days=1, seconds=5``; ``0``)."""
    parts = [p.strip() for p in args.split(",") if p.strip()]
    kwargs = dict(p.split("=", 1) for p in parts if "=" in p)
    return timedelta(**{k: float(v) for k, v in kwargs.items()}).total_seconds()


def _expectation(error: Any) -> str:
    """Pydantic's message as an "expected …" phrase (``Input should be a valid integer``)."""
    text = str(error["msg"])
    for prefix in ("Input should be ", "Value should be ", "Value error, "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    # A duration's bound, in seconds as it is written (`datetime.timedelta(0)`: 0 seconds).
    text = _TIMEDELTA.sub(lambda m: f"{_seconds_of(m.group(1)):g} seconds", text)
    return text[:1].lower() + text[1:]
