"""The settings of the Flight sink and source, one frozen model each.

:class:`~thalweg_bytewax.connectors.flight.FlightSink` and
:class:`~thalweg_bytewax.connectors.flight.FlightSource` build them from their keywords;
the partitions read only them. Durations are ``timedelta`` (seconds or ISO-8601 in
TOML) and the bearer token is a :class:`~thalweg_bytewax.config.SecretRef`, so no
message, repr or ``thalweg config show`` prints it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, field_validator

from thalweg_bytewax.config import ConnectorConfig, PositiveDuration, SecretRef
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns

from .._settings import MetadataPrefix

__all__ = [
    "DEFAULT_CONFIRM_TIMEOUT",
    "DEFAULT_MAX_UNCONFIRMED_BYTES",
    "FlightSinkConfig",
    "FlightSourceConfig",
]

# 64 MiB unconfirmed per sink partition: at a 20 ms confirm that is ~3 GB/s of headroom
# per shard (benchmarks/flight_ack.py), and a stalled server holds at most this much.
DEFAULT_MAX_UNCONFIRMED_BYTES = 64 * 1024 * 1024
# How long an epoch's commit waits for the last confirm before the epoch fails.
DEFAULT_CONFIRM_TIMEOUT = timedelta(seconds=60)
_SCHEMES = ("grpc://", "grpc+tcp://", "grpc+tls://", "grpc+unix://")


def _checked_location(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_SCHEMES):
        return value
    msg = (
        "expected a Flight location such as 'grpc://host:8815' or 'grpc+tls://host:443'; "
        f"got {value!r}"
    )
    raise ValueError(msg)


class _FlightEndpointConfig(ConnectorConfig):
    """What the sink's and the source's settings share: the server and the columns.

    The fields are each model's own, so each keeps its order and its docs.
    """

    if TYPE_CHECKING:
        location: str
        metadata_prefix: str

    @field_validator("location", mode="before", check_fields=False)
    @classmethod
    def _location(cls, value: Any) -> Any:
        return _checked_location(value)

    @property
    def columns(self) -> MetadataColumns:
        """The metadata columns under :attr:`metadata_prefix`."""
        return MetadataColumns(self.metadata_prefix)


class FlightSinkConfig(_FlightEndpointConfig):
    """The settings of a :class:`~thalweg_bytewax.connectors.flight.FlightSink`.

    Example:
        >>> FlightSinkConfig(location="grpc://127.0.0.1:8815", target="orders").max_burst
        256
    """

    component: ClassVar[str] = "flight sink"

    location: str
    """The server, e.g. `grpc://host:8815` (`grpc+tls://` for TLS)."""
    target: str = Field(min_length=1)
    """The name the server stores the rows under (the DoPut descriptor's path)."""
    shards: int = Field(default=4, ge=1)
    """Sink partitions the source partitions are spread over (one stream each)."""
    max_unconfirmed_bytes: int = Field(default=DEFAULT_MAX_UNCONFIRMED_BYTES, ge=1)
    """Bytes a sink partition sends before a confirm; a send blocks past it."""
    max_burst: int = Field(default=256, ge=1)
    """The most batches one confirm round trip covers."""
    confirm_timeout: PositiveDuration = DEFAULT_CONFIRM_TIMEOUT
    """How long an epoch's commit waits for its last confirm."""
    retry_for: PositiveDuration = timedelta(seconds=30)
    """How long a broken stream is reopened and its unconfirmed batches sent again."""
    token: SecretRef | None = None
    """A bearer token sent as the `authorization` header (`${env:NAME}` or `${file:/path}`)."""
    metadata_prefix: MetadataPrefix = DEFAULT_PREFIX
    """The prefix of the metadata columns."""


class FlightSourceConfig(_FlightEndpointConfig):
    """The settings of a :class:`~thalweg_bytewax.connectors.flight.FlightSource`.

    Example:
        >>> FlightSourceConfig(location="grpc://127.0.0.1:8815", path=["orders"]).path
        ['orders']
    """

    component: ClassVar[str] = "flight source"

    location: str
    """The server, e.g. `grpc://host:8815`."""
    path: list[str] = Field(min_length=1)
    """The flight's descriptor path (`GetFlightInfo`); each endpoint is one partition."""
    max_queued_batches: int = Field(default=8, ge=1)
    """Batches read ahead per partition (a background reader fills a bounded queue)."""
    timeout: PositiveDuration = timedelta(seconds=60)
    """How long `GetFlightInfo` and each read may take."""
    token: SecretRef | None = None
    """A bearer token sent as the `authorization` header."""
    metadata_prefix: MetadataPrefix = DEFAULT_PREFIX
    """The prefix of the metadata columns."""
