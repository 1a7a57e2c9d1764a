"""Settings: frozen pydantic models read from ``THALWEG_*`` environment variables.

Every flow (and every runnable example) declares its settings as one subclass of
:class:`Settings` and loads them with :meth:`Settings.load`. The pattern is the same
everywhere:

* a field ``bootstrap_servers`` is read from ``THALWEG_BOOTSTRAP_SERVERS``: the
  variable is always ``THALWEG_`` plus the field name in upper case;
* an unset or empty variable keeps the field's default; a field without a default is
  required;
* a list field takes a comma-separated value (``THALWEG_TOPICS=orders,payments``);
* a bad or missing value raises :class:`~thalweg_bytewax.errors.ConfigError` naming the
  variable, never a bare ``ValueError``, and never echoing a secret field's value.

Example:
    >>> from pydantic import Field
    >>> class LaneSettings(Settings):
    ...     bootstrap_servers: str
    ...     topics: list[str] = Field(min_length=1)
    ...     tail: bool = True
    >>> s = LaneSettings.load(
    ...     {"THALWEG_BOOTSTRAP_SERVERS": "localhost:9092", "THALWEG_TOPICS": "a,b"}
    ... )
    >>> s.topics, s.tail
    (['a', 'b'], True)

The configuration layer (TOML < environment < command line, ARCHITECTURE §8) builds on
these models: a TOML table and command-line flags become further mappings under the
same field names.
"""

from __future__ import annotations

import os
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, SecretBytes, SecretStr, ValidationError

from thalweg_bytewax.errors import ConfigError

__all__ = ["ENV_PREFIX", "Settings"]

ENV_PREFIX = "THALWEG_"
"""The prefix of every environment variable thalweg reads."""


def _mentions(annotation: Any, kinds: tuple[type, ...]) -> bool:
    """Whether ``annotation`` is one of ``kinds`` or a union / container holding one."""
    if isinstance(annotation, type) and issubclass(annotation, kinds):
        return True
    origin = typing.get_origin(annotation)
    if origin is None:
        return False
    if origin in kinds:
        return True
    return any(_mentions(arg, kinds) for arg in typing.get_args(annotation))


def _is_list(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_list(a) for a in typing.get_args(annotation))
    return False


class Settings(BaseModel):
    """Base of every settings model: frozen, keyword-only, unknown fields refused.

    Subclasses declare fields with defaults (or none, for a required setting) and load
    them with :meth:`load`. ``component`` names the owner in error messages, e.g.
    ``flows.orders``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    component: ClassVar[str] = "settings"
    """Who owns these settings, as error messages name it (e.g. ``flows.orders``)."""
    @classmethod
    def env_name(cls, field: str) -> str:
        """The environment variable that sets ``field``."""
        return ENV_PREFIX + field.upper()

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None) -> Self:
        """Read the settings from ``THALWEG_*`` variables over the defaults.

        Args:
            env: The variables to read (default: ``os.environ``).

        Returns:
            The validated settings.

        Raises:
            ConfigError: Naming the variable that is missing or invalid.
        """
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            raw = env.get(cls.env_name(name))
            if not raw:
                continue
            if _is_list(field.annotation):
                values[name] = [part.strip() for part in raw.split(",") if part.strip()]
            else:
                values[name] = raw
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            failure = exc
        # Raised outside the `except`: pydantic's own text echoes the input, which may be
        # a secret, so it is neither the cause nor the context of the error.
        msg = cls._message(failure, values)
        raise ConfigError(msg)

    @classmethod
    def _message(cls, exc: ValidationError, values: Mapping[str, Any]) -> str:
        problems = []
        for error in exc.errors():
            name = str(error["loc"][0]) if error["loc"] else ""
            var = cls.env_name(name) if name in cls.model_fields else name
            field = cls.model_fields.get(name)
            if error["type"] == "missing":
                problems.append(f"`{var}` is required; set it")
                continue
            secret = field is not None and _mentions(field.annotation, (SecretStr, SecretBytes))
            got = "a secret value (not shown)" if secret else repr(values.get(name))
            problems.append(f"`{var}`: expected {_expectation(error)}; got {got}")
        joined = "; ".join(problems)
        remedy = "fix the variable, or unset it for the default"
        return f"`{cls.component}` settings: {joined}; {remedy}"


def _expectation(error: Any) -> str:
    """Pydantic's message as an "expected …" phrase (``Input should be a valid integer``)."""
    text = str(error["msg"])
    for prefix in ("Input should be ", "Value should be ", "Value error, "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    return text[:1].lower() + text[1:]
