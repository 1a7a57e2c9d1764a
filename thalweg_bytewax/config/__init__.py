"""Configuration: frozen pydantic models loaded from TOML < ``THALWEG_*`` environment < ``--set``.

Every flow declares its settings as one subclass of :class:`Settings` and loads them
with :meth:`Settings.load`; any other pydantic model (a nested pipeline config built
from :class:`ConfigModel` sections) loads the same way with :func:`load_config`. The
layers, each overriding the one before, key by key:

1. the model's defaults;
2. a TOML file: the ``file`` argument, else the one ``THALWEG_CONFIG`` names;
3. environment variables: a key ``bootstrap_servers`` is read from
   ``THALWEG_BOOTSTRAP_SERVERS``, a nested key ``sinks.iceberg.warehouse`` from
   ``THALWEG_SINKS__ICEBERG__WAREHOUSE``; an unset or empty variable changes nothing, and
   a list takes a comma-separated value (``THALWEG_TOPICS=orders,payments``);
4. overrides ``key.path=value`` (the command line's ``--set``), read like a variable.

A bad or missing value raises :class:`~thalweg_bytewax.errors.ConfigError` naming the
file, variable or flag, the key and what was expected — never a bare ``ValueError``,
and never a secret's value.

Secrets are references: a :class:`SecretRef` setting holds ``${env:NAME}`` and
``${file:/path}`` references, which stay references in the model (``repr``,
``model_dump`` and ``thalweg config show`` print them, never their values) and are
resolved by :meth:`SecretRef.resolve` only where the secret is used. A client library's
free-form settings (:data:`ClientSettings`, e.g. ``librdkafka``) type every value whose
key names a credential (``sasl.password``, ``ssl.key.password``, ...) as a
:class:`SecretRef` (:func:`type_secrets`, the validator of any such map); and
:func:`resolve_settings` gives the client its plain map. Whatever a
config prints (``repr``, ``model_dump(mode="json")``, ``thalweg config show``, errors)
also has every URL's userinfo and query values redacted.

Example:
    >>> from pydantic import Field
    >>> class LaneSettings(Settings):
    ...     bootstrap_servers: str
    ...     topics: list[str] = Field(min_length=1)
    ...     tail: bool = True
    >>> s = LaneSettings.load(
    ...     {"THALWEG_BOOTSTRAP_SERVERS": "localhost:9092", "THALWEG_TOPICS": "a,b"},
    ...     overrides=["tail=false"],
    ... )
    >>> s.topics, s.tail
    (['a', 'b'], False)
"""

from __future__ import annotations

from thalweg_bytewax.config._client import ClientSettings, resolve_settings, type_secrets
from thalweg_bytewax.config._connector import (
    UNSET,
    ConnectorConfig,
    Unset,
    bound_keyword,
    duration_keyword,
    renamed_keys,
    seconds_keywords,
)
from thalweg_bytewax.config._duration import Duration, PositiveDuration, seconds
from thalweg_bytewax.config._layers import CONFIG_ENV, ENV_PREFIX
from thalweg_bytewax.config._load import SecretUse, load_config, secret_uses
from thalweg_bytewax.config._model import ConfigModel, Settings
from thalweg_bytewax.config._render import render_reference, render_starter
from thalweg_bytewax.config._secret import SecretRef, SecretReference
from thalweg_bytewax.config._toml import to_toml

__all__ = [
    "CONFIG_ENV",
    "ClientSettings",
    "ENV_PREFIX",
    "ConfigModel",
    "ConnectorConfig",
    "Duration",
    "SecretRef",
    "SecretReference",
    "SecretUse",
    "Settings",
    "PositiveDuration",
    "load_config",
    "render_reference",
    "render_starter",
    "renamed_keys",
    "resolve_settings",
    "seconds",
    "seconds_keywords",
    "bound_keyword",
    "duration_keyword",
    "UNSET",
    "Unset",
    "secret_uses",
    "to_toml",
    "type_secrets",
]
