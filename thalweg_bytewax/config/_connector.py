"""``ConnectorConfig``: the base of a connector's frozen configuration model.

A connector (a sink, a source) declares its settings once, as a subclass; the
connector's keywords, a pipeline's TOML table and the environment all build that same
model. :meth:`ConnectorConfig.build` is the keyword path: it validates the values and
turns pydantic's report into one :class:`~thalweg_bytewax.errors.ConfigError` that names
the connector, each key and what was expected, never quoting a secret.

A renamed setting keeps working for one release, with a :class:`DeprecationWarning`
that names both names: :func:`renamed_keys` for a model's keys (a TOML table, any
config model's input), :func:`seconds_keywords` for a connector's Python keywords that
took seconds (``retry_backoff_s``) before the ``timedelta`` one (``retry_backoff``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, ClassVar, Self

import annotated_types
from pydantic import SecretStr, ValidationError, model_validator

from thalweg_bytewax._redact import redact_value
from thalweg_bytewax.config._model import ConfigModel
from thalweg_bytewax.config._secret import SecretRef
from thalweg_bytewax.errors import ConfigError

__all__ = ["UNSET", "ConnectorConfig", "Unset", "bound_keyword", "renamed_keys", "seconds_keywords"]

# How much of a refused value a message quotes.
_GOT_LIMIT = 80


class ConnectorConfig(ConfigModel):
    """Base of a connector's configuration: frozen, unknown keys refused, secrets typed.

    Subclasses set :attr:`component` (``"parquet sink"``), the name messages start with.
    """

    component: ClassVar[str] = "connector"
    """Who owns these settings, as error messages name it (``"parquet sink"``)."""

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        """Each key of :attr:`old_names` moved to its new name, with a warning."""
        if not cls.old_names:
            return data
        return renamed_keys(data, cls.old_names, where=cls.component)

    @classmethod
    def checked(cls, config: object) -> Self:
        """``config`` itself, when it is one of these settings (a connector's ``from_config``).

        Raises:
            ConfigError: ``"<component>: expected a <model>; got <type>"`` for anything
                else (a dict, another connector's settings).
        """
        if not isinstance(config, cls):
            msg = f"{cls.component}: expected a {cls.__name__}; got {type(config).__name__}"
            raise ConfigError(msg)
        return config

    @classmethod
    def build(cls, values: Mapping[str, Any], *, component: str | None = None) -> Self:
        """The model of ``values`` (the connector's keywords, by field name).

        Keywords are validated strictly: ``shards="4"`` or ``shards=True`` is refused, as
        Python code means what it passes; TOML and the environment (text) go through
        :func:`~thalweg_bytewax.config.load_config`, which converts.

        Args:
            values: The settings by field name.
            component: Who messages name (default :attr:`component`), e.g. a subclass
                of the connector.

        Raises:
            ConfigError: ``"<component>: `key` expected ...; got ..."`` for every key at
                fault; a secret's value is never quoted.
        """
        try:
            return cls.model_validate(dict(values), strict=True)
        except ValidationError as exc:
            failure = exc
        problems = [_problem(cls, error) for error in failure.errors()]
        msg = f"{component or cls.component}: {'; '.join(problems)}"
        raise ConfigError(msg)


def renamed_keys(
    data: Any,
    renames: Mapping[str, str | tuple[str, Callable[[Any], Any]]],
    *,
    where: str,
) -> Any:
    """``data`` (a model's input) with each old key moved to its new name, warning once each.

    Args:
        data: What a ``mode="before"`` model validator receives.
        renames: Old key -> new key, or -> ``(new key, convert)`` when the value changes
            shape too.
        where: Who owns the keys, as the warning names it (``pipeline [dedup]``).

    Returns:
        The input with every old key renamed (a copy when one was).

    Raises:
        ConfigError: When both an old key and its new name are given.
    """
    if not isinstance(data, Mapping) or not any(old in data for old in renames):
        return data
    out = dict(data)
    for old, spec in renames.items():
        if old not in out:
            continue
        new, convert = (spec, None) if isinstance(spec, str) else spec
        if new in out:
            msg = f"{where}: `{old}` is the old name of `{new}`; got both; keep `{new}`"
            raise ConfigError(msg)
        warnings.warn(
            f"{where}: `{old}` is deprecated; write `{new}` (the old name goes in the next "
            "release)",
            DeprecationWarning,
            stacklevel=2,
        )
        value = out.pop(old)
        out[new] = convert(value) if convert is not None else value
    return out


def seconds_keywords(
    component: str, durations: Mapping[str, object], old: Mapping[str, object]
) -> dict[str, object]:
    """A connector's duration keywords, each deprecated ``<name>_s`` one read as seconds.

    Args:
        component: The connector, as the warning names it (``"postgres sink"``).
        durations: The ``timedelta`` keywords by name; ``None`` when not passed.
        old: The deprecated keywords in seconds by name (``retry_backoff_s``); ``None``
            when not passed.

    Returns:
        Every duration passed, by name: a ``<name>_s`` keyword (warned about) where
        ``<name>`` is not passed; a value that is no number as given, for the model to
        refuse by name.
    """
    out = {name: value for name, value in durations.items() if value is not None}
    for name in durations:
        value = old.get(f"{name}_s")
        if value is None:
            continue
        warnings.warn(
            f"{component}: `{name}_s` is deprecated; pass `{name}=timedelta(seconds=...)`",
            DeprecationWarning,
            stacklevel=3,
        )
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = timedelta(seconds=value)
        out.setdefault(name, value)
    return out


class Unset:
    """The type of :data:`UNSET`: a keyword left out, where ``None`` means something."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()
"""A keyword not passed (``None`` is a value: no bound)."""


def _old_keyword_given(
    where: str, name: str, value: object, old_name: str, *, stacklevel: int
) -> None:
    """Warn that ``old_name`` is deprecated; refuse it beside ``name``."""
    warnings.warn(
        f"{where}: `{old_name}` is deprecated; pass `{name}=timedelta(seconds=...)` "
        "(the old name goes in the next release)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    if not isinstance(value, Unset):
        msg = f"{where}: got `{name}` and its old name `{old_name}`; keep `{name}`"
        raise ConfigError(msg)


def bound_keyword(  # noqa: PLR0913 - the new and the old keyword, each named
    where: str,
    name: str,
    value: timedelta | None | Unset,
    old_name: str,
    old: float | None | Unset,
    *,
    default: timedelta | None,
    stacklevel: int = 3,
) -> float | None:
    """A time bound keyword in seconds (``None``: unbounded); its deprecated seconds one warns.

    Args:
        where: Who takes the keyword, as messages name it (``"sql `lines`"``).
        name: The ``timedelta`` keyword (``timeout``).
        value: Its value; :data:`UNSET` when not passed.
        old_name: The deprecated keyword in seconds (``timeout_seconds``).
        old: Its value; :data:`UNSET` when not passed.
        default: The bound when neither is passed.
        stacklevel: Where the deprecation warning points, as :func:`warnings.warn`
            counts from here (3: the caller of the function that calls this one).

    Raises:
        ConfigError: When both are passed, or ``value`` is no positive ``timedelta``
            nor ``None``.
    """
    if not isinstance(old, Unset):
        _old_keyword_given(where, name, value, old_name, stacklevel=stacklevel + 1)
        return old
    if isinstance(value, Unset):
        value = default
    if value is None:
        return None
    if not isinstance(value, timedelta) or value <= timedelta(0):
        msg = (
            f"{where}: `{name}` expected a positive datetime.timedelta or None; got "
            f"{_got(value)}; e.g. {name}=timedelta(seconds=30)"
        )
        raise ConfigError(msg)
    return value.total_seconds()


def duration_keyword(  # noqa: PLR0913 - the new and the old keyword, each named
    where: str,
    name: str,
    value: timedelta | Unset,
    old_name: str,
    old: float | Unset,
    *,
    default: timedelta | Unset = UNSET,
    zero: bool = False,
    stacklevel: int = 3,
) -> float:
    """A duration keyword in seconds; its deprecated keyword in seconds warns.

    Like :func:`bound_keyword` for a duration that always has a value (a wait, an
    interval): ``None`` is no value here.

    Args:
        where: Who takes the keyword, as messages name it (``"wait_for_peers"``).
        name: The ``timedelta`` keyword (``timeout``).
        value: Its value; :data:`UNSET` when not passed.
        old_name: The deprecated keyword in seconds (``timeout_s``).
        old: Its value; :data:`UNSET` when not passed.
        default: The duration when neither is passed; :data:`UNSET`: one is required.
        zero: Whether no time at all (``timedelta(0)``) is a value.
        stacklevel: Where the deprecation warning points, as :func:`warnings.warn`
            counts from here (3: the caller of the function that calls this one).

    Raises:
        ConfigError: When both are passed, neither is and there is no default, or the
            value is no ``timedelta`` (no number of seconds for the old keyword) or is
            negative (or zero, unless ``zero``).
    """
    if not isinstance(old, Unset):
        _old_keyword_given(where, name, value, old_name, stacklevel=stacklevel + 1)
        if isinstance(old, bool) or not isinstance(old, int | float):
            msg = f"{where}: `{old_name}` expected a number of seconds; got {_got(old)}"
            raise ConfigError(msg)
        seconds, given = float(old), old_name
    else:
        if isinstance(value, Unset):
            value = default
        if isinstance(value, Unset):
            msg = f"{where}: `{name}` is required; e.g. {name}=timedelta(seconds=30)"
            raise ConfigError(msg)
        if not isinstance(value, timedelta):
            msg = (
                f"{where}: `{name}` expected a datetime.timedelta; got {_got(value)}; "
                f"e.g. {name}=timedelta(seconds=30)"
            )
            raise ConfigError(msg)
        seconds, given = value.total_seconds(), name
    if seconds < 0 or (seconds == 0 and not zero):
        expected = "zero or more" if zero else "more than zero"
        msg = f"{where}: `{given}` expected {expected} seconds; got {seconds:g}"
        raise ConfigError(msg)
    return seconds


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
