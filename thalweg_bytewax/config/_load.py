"""Load any config model from its layers, failing with errors that name the place to fix."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, SecretStr, ValidationError

from thalweg_bytewax._redact import REDACTED, is_secret_key, redact_origins_in
from thalweg_bytewax.config._layers import (
    CONFIG_ENV,
    Layer,
    annotation_at,
    env_layer,
    file_layer,
    merge,
    override_layer,
)
from thalweg_bytewax.config._secret import SecretRef, SecretReference, _parse
from thalweg_bytewax.config._validation_message import (
    SECRET_TYPES,
    component_name,
    key_origin,
    key_subject,
    mentions,
    validation_message,
)
from thalweg_bytewax.errors import ConfigError

__all__ = ["ConfigT", "SecretUse", "load_config", "secret_uses"]

logger = logging.getLogger(__name__)

ConfigT = TypeVar("ConfigT", bound=BaseModel)
"""A config model class: any pydantic model (``Settings`` or a nested pipeline model)."""

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
            component_name(model),
            ", ".join(_sources(layers, file)) or "defaults",
        )
        return loaded
    # Raised outside the `except`: pydantic's own text echoes the input, which may be a
    # secret, so it is neither the cause nor the context of the error.
    msg = _scrub(validation_message(model, failure, values, layers, file), model, values)
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
            if named or (annotation is not None and mentions(annotation, SECRET_TYPES)):
                secrets.add(node)

    _leaves(values, ())
    out = redact_origins_in(text, *urls)
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= _MIN_SECRET_CHARS:
            out = out.replace(secret, REDACTED)
    return out


def _sources(layers: list[Layer], file: str | Path | None) -> Iterator[str]:
    for layer in layers:
        if layer.kind == "file":
            yield f"`{file}`"
        elif layer.origins:
            yield f"{len(layer.origins)} {'variables' if layer.kind == 'env' else 'overrides'}"


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
            subject = key_subject(path, key_origin(layers, path))
            msg = (
                f"`{component_name(model)}` settings: {subject}: "
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
