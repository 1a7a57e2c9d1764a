"""The base models: :class:`ConfigModel` for any config section, :class:`Settings` for a flow's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from thalweg_bytewax._redact import is_secret_key, redact_text, redact_value
from thalweg_bytewax.config._layers import env_name
from thalweg_bytewax.config._load import load_config
from thalweg_bytewax.config._secret import SecretRef

__all__ = ["ConfigModel", "Settings"]


class ConfigModel(BaseModel):
    """Base of every config model and section: frozen, keyword-only, unknown keys refused.

    A field's docstring (a string literal right below it) is its description: ``thalweg
    init`` writes it above the key in the starter file, and the settings reference in
    the docs is generated from it.

    Nothing it prints holds a credential: secret settings are :class:`SecretRef` (shown as
    their references), and ``repr``, ``str`` and ``model_dump(mode="json")`` (what
    ``thalweg config show`` prints) also redact every URL's userinfo and query values and
    mask every mapping entry whose key names a credential (see
    :func:`thalweg_bytewax._redact.redact_value`). Attribute access and
    ``model_dump()`` in Python mode keep the values as written, for the code that uses them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    old_names: ClassVar[Mapping[str, str]] = {}
    """Old top-level key -> its new name. The environment layer reads the old name's
    variable too (``THALWEG_DEDUP_WINDOW_S`` for ``dedup_window_s``), so a model's
    ``renamed_keys`` validator moves it with a warning instead of the variable being
    ignored as someone else's."""

    def __repr_args__(self) -> Any:
        """The fields as ``repr`` shows them: redacted."""
        for key, value in super().__repr_args__():
            if _foreign_models(value):  # a model of a library's own: its text, redacted
                yield key, _Shown(redact_text(repr(value)))
            else:
                yield key, redact_value(value)

    # The return type given here, not read from the annotation: pydantic 2.10 cannot
    # resolve that string for a subclass defined in another module ("not fully defined").
    @model_serializer(mode="wrap", return_type=Any)
    def _redacted(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        """JSON-mode dumps (what is shown) redacted; Python-mode dumps as written."""
        data = handler(self)
        if info.mode != "json" or not isinstance(data, dict):
            return data
        for name, field in type(self).model_fields.items():
            key = field.alias if field.alias in data else name
            if key in data:
                data[key] = _shown(getattr(self, name), data[key])
        return data


class Settings(ConfigModel):
    """Base of every flow's settings: a :class:`ConfigModel` with a layered :meth:`load`.

    Subclasses declare fields with defaults (or none, for a required setting) and load
    them with :meth:`load`. ``component`` names the owner in error messages, e.g.
    ``flows.orders``.
    """

    component: ClassVar[str] = "settings"
    """Who owns these settings, as error messages name it (e.g. ``flows.orders``)."""

    @classmethod
    def env_name(cls, field: str) -> str:
        """The environment variable that sets ``field`` (``a.b`` for a nested key)."""
        return env_name(field.split("."))

    @classmethod
    def load(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        file: str | Path | None = None,
        overrides: Iterable[str] = (),
    ) -> Self:
        """Read the settings: defaults < TOML file < ``THALWEG_*`` variables < overrides.

        Args:
            env: The variables to read (default: ``os.environ``).
            file: A TOML file (default: the one ``THALWEG_CONFIG`` names, if set).
            overrides: ``key.path=value`` strings (the command line's ``--set``).

        Returns:
            The validated settings.

        Raises:
            ConfigError: Naming the file, variable or flag and the key that is missing
                or invalid, and what was expected.
        """
        return load_config(cls, file=file, env=env, overrides=overrides)


class _Shown:
    """A value whose ``repr`` is given text (a redacted rendering)."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def __repr__(self) -> str:
        return self._text


def _foreign_models(value: Any) -> bool:
    """Whether ``value`` is (or holds) a pydantic model that does not redact itself."""
    if isinstance(value, list | tuple):
        return any(_foreign_models(v) for v in value)
    return isinstance(value, BaseModel) and not isinstance(value, ConfigModel)


def _shown(value: Any, dumped: Any) -> Any:
    """``dumped`` (the JSON dump of ``value``) as it may be shown.

    A section dumps itself redacted and a :class:`SecretRef` as its references, so both
    stay; a mapping's entry whose key names a credential and is not a secret setting
    becomes ``***``; every other string has its URLs redacted.
    """
    if isinstance(value, ConfigModel | SecretRef):
        return dumped
    if isinstance(value, Mapping) and isinstance(dumped, dict):
        return {
            k: _shown(v, dumped[k])
            if isinstance(v, ConfigModel | SecretRef) or not is_secret_key(str(k))
            else redact_value({k: dumped[k]})[k]
            for k, v in value.items()
            if k in dumped
        }
    if isinstance(value, list | tuple) and isinstance(dumped, list) and len(value) == len(dumped):
        return [_shown(v, d) for v, d in zip(value, dumped, strict=True)]
    return redact_value(dumped)
