"""The base models: :class:`ConfigModel` for any config section, :class:`Settings` for a flow's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import ClassVar, Self

from pydantic import BaseModel, ConfigDict

from thalweg_bytewax.config._layers import env_name
from thalweg_bytewax.config._load import load_config

__all__ = ["ConfigModel", "Settings"]


class ConfigModel(BaseModel):
    """Base of every config model and section: frozen, keyword-only, unknown keys refused.

    A field's docstring (a string literal right below it) is its description: ``thalweg
    init`` writes it above the key in the starter file, and the settings reference in
    the docs is generated from it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


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
