"""``ClientSettings``: a client library's free-form settings, their credentials typed as secrets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, TypeVar

from pydantic import AfterValidator

from thalweg_bytewax._redact import is_secret_key
from thalweg_bytewax.config._secret import SecretRef

__all__ = ["ClientSettings", "resolve_settings", "type_secrets"]

_V = TypeVar("_V")


def type_secrets(settings: Mapping[str, _V]) -> dict[str, _V | SecretRef]:
    """Every text value whose key names a credential (``sasl.password``) as a :class:`SecretRef`.

    The ``AfterValidator`` of a model's free-form settings (a client's, a filesystem's
    storage options); other values stay as they are.
    """
    return {
        key: SecretRef(value) if isinstance(value, str) and is_secret_key(key) else value
        for key, value in settings.items()
    }


ClientSettings = Annotated[dict[str, str | SecretRef], AfterValidator(type_secrets)]
"""Settings passed through to a client library (librdkafka's ``sasl.password``, ...).

A value whose key names a credential (:func:`thalweg_bytewax._redact.is_secret_key`:
``sasl.password``, ``ssl.key.password``, ``ssl.keystore.password``,
``sasl.oauthbearer.client.secret``, ``sasl.oauthbearer.config``, ...) is a
:class:`SecretRef`: it takes ``${env:NAME}`` / ``${file:/path}`` references, shows as its
reference (or ``***``) everywhere, and is listed by ``thalweg config secrets``. Other
values stay plain text. :func:`resolve_settings` gives the client its plain map.
"""


def resolve_settings(
    settings: Mapping[str, str | SecretRef], env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The plain map a client takes: every secret value resolved. Call it at the point of use.

    Args:
        settings: A :data:`ClientSettings` value.
        env: The environment for ``${env:…}`` references (default: ``os.environ``).

    Returns:
        The settings with their secrets substituted.

    Raises:
        ConfigError: Naming the first reference that cannot be resolved (never a value).
    """
    return {
        key: value.resolve(env) if isinstance(value, SecretRef) else value
        for key, value in settings.items()
    }
