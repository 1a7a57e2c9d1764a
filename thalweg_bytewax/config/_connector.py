"""``ConnectorConfig``: the base of a connector's frozen configuration model.

A connector (a sink, a source) declares its settings once, as a subclass; the
connector's keywords, a pipeline's TOML table and the environment all build that same
model. :meth:`ConnectorConfig.build` is the keyword path: it validates the values and
turns pydantic's report into one :class:`~thalweg_bytewax.errors.ConfigError` that names
the connector, each key and what was expected, never quoting a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, ClassVar, Self

import annotated_types
from pydantic import SecretStr, ValidationError

from thalweg_bytewax._redact import redact_value
from thalweg_bytewax.config._model import ConfigModel
from thalweg_bytewax.config._secret import SecretRef
from thalweg_bytewax.errors import ConfigError

__all__ = ["ConnectorConfig"]

# How much of a refused value a message quotes.
_GOT_LIMIT = 80


class ConnectorConfig(ConfigModel):
    """Base of a connector's configuration: frozen, unknown keys refused, secrets typed.

    Subclasses set :attr:`component` (``"parquet sink"``), the name messages start with.
    """

    component: ClassVar[str] = "connector"
    """Who owns these settings, as error messages name it (``"parquet sink"``)."""

    @classmethod
    def build(cls, values: Mapping[str, Any]) -> Self:
        """The model of ``values`` (the connector's keywords, by field name).

        Keywords are validated strictly: ``shards="4"`` or ``shards=True`` is refused, as
        Python code means what it passes; TOML and the environment (text) go through
        :func:`~thalweg_bytewax.config.load_config`, which converts.

        Raises:
            ConfigError: ``"<component>: `key` expected ...; got ..."`` for every key at
                fault; a secret's value is never quoted.
        """
        try:
            return cls.model_validate(dict(values), strict=True)
        except ValidationError as exc:
            failure = exc
        problems = [_problem(cls, error) for error in failure.errors()]
        msg = f"{cls.component}: {'; '.join(problems)}"
        raise ConfigError(msg)


def _problem(model: type[ConnectorConfig], error: Any) -> str:
    loc = tuple(error["loc"])
    key = ".".join(str(p) for p in loc) or "settings"
    text = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "value_error" or not loc:
        return f"`{key}`: {text}" if loc else text
    if error["type"] == "extra_forbidden":
        known = ", ".join(f"`{name}`" for name in model.model_fields)
        return f"`{key}`: unknown setting; expected one of {known}"
    secret = _is_secret(model, loc)
    got = "" if secret else f"; got {_got(error.get('input'))}"
    expected = _bounded(model, loc) or text.removeprefix("Input should be ")
    return f"`{key}` expected {expected[:1].lower()}{expected[1:]}{got}"


def _bounded(model: type[ConnectorConfig], loc: tuple[Any, ...]) -> str | None:
    """``an integer >= 1`` for a bounded integer field, whatever pydantic refused."""
    field = model.model_fields.get(str(loc[0]))
    if field is None or len(loc) != 1 or field.annotation is not int:
        return None
    for bound in field.metadata:
        if isinstance(bound, annotated_types.Ge):
            return f"an integer >= {bound.ge}"
        if isinstance(bound, annotated_types.Gt):
            return f"an integer > {bound.gt}"
    return "an integer"


def _is_secret(model: type[ConnectorConfig], loc: tuple[Any, ...]) -> bool:
    field = model.model_fields.get(str(loc[0]))
    text = repr(field.annotation) if field is not None else ""
    return field is None or SecretRef.__name__ in text or SecretStr.__name__ in text


def _got(value: Any) -> str:
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g} seconds"
    text = repr(redact_value(value))
    return text if len(text) <= _GOT_LIMIT else text[: _GOT_LIMIT - 1] + "…"
