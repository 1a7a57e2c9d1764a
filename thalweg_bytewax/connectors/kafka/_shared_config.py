"""Private: what ``KafkaSourceConfig`` and ``KafkaSinkConfig`` share.

A broker list (a list or one comma-separated string), the librdkafka settings passed
through with every credential typed as a :class:`~thalweg_bytewax.config.SecretRef`, and
their resolution, with the SASL ``password``, where a client is built; the base of both
models, which checks their metadata prefix and names their columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, Self

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from thalweg_bytewax.config import ConnectorConfig, SecretRef, resolve_settings, type_secrets
from thalweg_bytewax.records.metadata import MetadataColumns, metadata_columns

from ._config import SASL_PASSWORD

__all__ = ["KafkaClientConfig", "KafkaSettings", "Names", "resolved_settings"]


def _names(value: Any) -> Any:
    """A comma-separated string as a list (``"a:1, b:2"``); anything else as is."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


KafkaSettings = Annotated[
    dict[str, str | bool | int | float | SecretRef], AfterValidator(type_secrets)
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


class KafkaClientConfig(ConnectorConfig):
    """The base of the source's and the sink's settings: their columns and timeouts.

    The fields are each model's own, so each keeps its order and its docs.
    """

    if TYPE_CHECKING:
        metadata_prefix: str
        metadata_timeout: timedelta

    @model_validator(mode="after")
    def _checked(self) -> Self:
        metadata_columns(self.metadata_prefix, self.component)
        return self

    @cached_property
    def columns(self) -> MetadataColumns:
        """The metadata columns of :attr:`metadata_prefix`."""
        return metadata_columns(self.metadata_prefix, self.component)

    @property
    def metadata_timeout_s(self) -> float:
        """:attr:`metadata_timeout` in seconds, as the client takes it."""
        return self.metadata_timeout.total_seconds()
