"""Load any config model from its layers, failing with errors that name the place to fix."""

from __future__ import annotations

import logging
import os
import re
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, SecretBytes, SecretStr, ValidationError

from thalweg_bytewax._redact import REDACTED, is_secret_key, redact_origins_in
from thalweg_bytewax.config._layers import (
    CONFIG_ENV,
    Layer,
    annotation_at,
    env_layer,
    env_name,
    file_layer,
    merge,
    override_layer,
    submodel,
    submodels,
    union_tag,
)
from thalweg_bytewax.config._secret import SecretRef, SecretReference, _parse
from thalweg_bytewax.errors import ConfigError

__all__ = ["ConfigT", "SecretUse", "load_config", "secret_uses"]

logger = logging.getLogger(__name__)

ConfigT = TypeVar("ConfigT", bound=BaseModel)
"""A config model class: any pydantic model (``Settings`` or a nested pipeline model)."""

_SECRET_TYPES = (SecretStr, SecretBytes, SecretRef)
_GOT_LIMIT = 80
# Secret values shorter than this are not searched for in a message (see `_redact`).
_MIN_SECRET_CHARS = 4


def load_config(
    model: type[ConfigT],
    *,
    file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Iterable[str] = (),
) -> ConfigT:
    """Load ``model`` from a TOML file, then ``THALWEG_*`` variables, then overrides.

    Args:
        model: The pydantic model to build (frozen, ``extra="forbid"`` by convention).
        file: The TOML file; default: the one ``THALWEG_CONFIG`` names in ``env``, if any.
        env: The environment (default: ``os.environ``).
        overrides: ``key.path=value`` strings, as ``--set`` takes them.

    Returns:
        The validated model. Secret references stay references (see ``SecretRef``).

    Raises:
        ConfigError: Naming, for every bad key, the file / variable / flag it came from,
            the key path and what was expected; never a secret's value.
    """
    env = os.environ if env is None else env
    if file is None and env.get(CONFIG_ENV):
        file = env[CONFIG_ENV]
    layers = [file_layer(file)] if file is not None else []
    layers += [env_layer(model, env), override_layer(model, overrides)]
    values = merge(layers)
    try:
        loaded = model.model_validate(values)
    except ValidationError as exc:
        failure = exc
    else:
        try:
            _refuse_references_in_plain_settings(model, loaded, layers, file)
        except ConfigError as exc:
            raise ConfigError(_scrub(str(exc), model, values)) from None
        logger.info(
            "loaded %s settings from %s",
            _component(model),
            ", ".join(_sources(layers, file)) or "defaults",
        )
        return loaded
    # Raised outside the `except`: pydantic's own text echoes the input, which may be a
    # secret, so it is neither the cause nor the context of the error.
    msg = _scrub(_message(model, failure, values, layers, file), model, values)
    raise ConfigError(msg)


def _scrub(text: str, model: type[BaseModel], values: Any) -> str:
    """``text`` without a credential any loaded value holds, however a validator quoted it.

    Every URL's userinfo, query values and fragment go (as written and decoded), and so
    does every value of a secret setting or of an entry whose key names a credential.
    """
    urls: list[str] = []
    secrets: set[str] = set()

    def _leaves(node: Any, path: tuple[str | int, ...]) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                _leaves(child, (*path, str(key)))
        elif isinstance(node, list):
            for i, child in enumerate(node):
                _leaves(child, (*path, i))
        elif isinstance(node, str):
            if "://" in node:
                urls.append(node)
            annotation = annotation_at(model, path)
            names = [p for p in path if isinstance(p, str)]
            named = bool(names) and is_secret_key(names[-1])
            if named or (annotation is not None and _mentions(annotation, _SECRET_TYPES)):
                secrets.add(node)

    _leaves(values, ())
    out = redact_origins_in(text, *urls)
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= _MIN_SECRET_CHARS:
            out = out.replace(secret, REDACTED)
    return out


def _component(model: type[BaseModel]) -> str:
    return str(getattr(model, "component", model.__name__))


def _sources(layers: list[Layer], file: str | Path | None) -> Iterator[str]:
    for layer in layers:
        if layer.kind == "file":
            yield f"`{file}`"
        elif layer.origins:
            yield f"{len(layer.origins)} {'variables' if layer.kind == 'env' else 'overrides'}"


def _where(layers: list[Layer], path: tuple[str, ...]) -> tuple[str, str] | None:
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


def _subject(path: tuple[str | int, ...], where: tuple[str, str] | None) -> str:
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


def _mentions(annotation: Any, kinds: tuple[type, ...]) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, kinds):
        return True
    return any(_mentions(arg, kinds) for arg in typing.get_args(annotation))


def _got(model: type[BaseModel], path: tuple[str | int, ...], values: Any) -> str:
    annotation = annotation_at(model, path)
    if annotation is None or _mentions(annotation, _SECRET_TYPES):
        # An unknown place (or a whole table) may hold a secret: show none of it.
        return "a secret value (not shown)" if annotation is not None else "a value not shown"
    value = _lookup(values, path)
    if isinstance(value, dict | list):  # a section: its keys may include secrets
        return f"a {'table' if isinstance(value, dict) else 'list'} (not shown)"
    text = repr(value)
    return text if len(text) <= _GOT_LIMIT else text[: _GOT_LIMIT - 1] + "…"


def _message(
    model: type[BaseModel],
    exc: ValidationError,
    values: dict[str, Any],
    layers: list[Layer],
    file: str | Path | None,
) -> str:
    problems = []
    for error in exc.errors():
        loc, chosen = _untagged(model, tuple(error["loc"]))
        path = _known_prefix(model, loc)
        if error["type"] == "extra_forbidden":
            path = (*path, *loc[len(path) : len(path) + 1])
        where = _where(layers, _names(path))
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
            problems.append(f"{_subject(path, where)}: unknown key; expected one of {known}")
        elif error["type"] == "value_error":
            # A validator's own message: says what was expected and got, quoting no secret.
            problems.append(f"{_subject(path, where)}: {_expectation(error)}")
        else:
            got = _got(model, path, values)
            problems.append(f"{_subject(path, where)}: expected {_expectation(error)}; got {got}")
    joined = "; ".join(problems)
    remedy = "fix each value named, or remove it for the default"
    return f"`{_component(model)}` settings: {joined}; {remedy}"


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


def _walk(value: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every leaf of a loaded model with its key path (list items keep the list's path)."""
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _walk(getattr(value, name), (*path, name))
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _walk(child, (*path, str(key)))
    elif isinstance(value, list | tuple | set | frozenset):
        for child in value:
            yield from _walk(child, path)
    else:
        yield path, value


def _refuse_references_in_plain_settings(
    model: type[BaseModel], loaded: BaseModel, layers: list[Layer], file: str | Path | None
) -> None:
    """A ``${env:…}`` in a setting that is not a ``SecretRef`` would be used as literal text."""
    for path, value in _walk(loaded, ()):
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        if not isinstance(text, str) or "${" not in text:
            continue
        try:
            refs = _parse(text)
        except ValueError:
            continue  # a plain setting may hold a literal `${`
        if refs:
            msg = (
                f"`{_component(model)}` settings: {_subject(path, _where(layers, path))}: "
                "expected a plain value (only secret settings take `${env:…}` and "
                f"`${{file:…}}` references); got the reference `{refs[0]}`; write the value "
                "itself"
            )
            raise ConfigError(msg)


@dataclass(frozen=True, slots=True)
class SecretUse:
    """One secret a loaded config needs, for ``thalweg config secrets``.

    Attributes:
        key: The setting's key path (``sinks.postgres.dsn``).
        reference: The reference (``None`` when the secret is given as a plain value).
        problem: Why it cannot be resolved now, or ``None`` when it can.
    """

    key: str
    reference: SecretReference | None
    problem: str | None


def secret_uses(config: BaseModel, env: Mapping[str, str] | None = None) -> list[SecretUse]:
    """Every secret reference in a loaded config and whether it resolves now (no value read).

    Args:
        config: A loaded config model.
        env: The environment to check ``${env:…}`` references in (default: ``os.environ``).

    Returns:
        One entry per reference (and one per secret given as a plain value), by key path.
    """
    uses = []
    for path, value in _walk(config, ()):
        if not isinstance(value, SecretRef):
            continue
        key = ".".join(path)
        if not value.references:
            uses.append(SecretUse(key, None, None))
        for ref in value.references:
            uses.append(SecretUse(key, ref, ref.problem(env)))
    return uses
