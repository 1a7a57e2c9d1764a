"""Private: what ``KafkaSourceConfig`` and ``KafkaSinkConfig`` share.

A broker list (a list or one comma-separated string), the librdkafka settings passed
through with every credential typed as a :class:`~thalweg_bytewax.config.SecretRef`, and
their resolution, with the SASL ``password``, where a client is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

from thalweg_bytewax._redact import is_secret_key
from thalweg_bytewax.config import SecretRef, resolve_settings

from ._config import SASL_PASSWORD

__all__ = ["KafkaSettings", "Names", "resolved_settings"]


def _names(value: Any) -> Any:
    """A comma-separated string as a list (``"a:1, b:2"``); anything else as is."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


def _type_secrets(settings: dict[str, Any]) -> dict[str, Any]:
    """Every value whose key names a credential as a :class:`SecretRef` (text only)."""
    return {
        key: SecretRef(value) if isinstance(value, str) and is_secret_key(key) else value
        for key, value in settings.items()
    }


KafkaSettings = Annotated[
    dict[str, str | bool | int | float | SecretRef], AfterValidator(_type_secrets)
]
"""librdkafka properties passed through: a value whose key names a credential
(``sasl.password``, ``ssl.key.password``, ``sasl.oauthbearer.client.secret``, ...) is a
:class:`~thalweg_bytewax.config.SecretRef`; the rest stay as written."""

Names = Annotated[list[str], BeforeValidator(_names), Field(min_length=1)]


def resolved_settings(librdkafka: Mapping[str, Any], password: SecretRef | None) -> dict[str, Any]:
    """``librdkafka`` with its secrets resolved, ``password`` as its ``sasl.password``."""
    resolved: dict[str, Any] = resolve_settings(librdkafka)
    if password is not None:
        resolved[SASL_PASSWORD] = password.resolve()
    return resolved
