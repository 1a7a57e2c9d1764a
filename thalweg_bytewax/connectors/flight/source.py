"""Arrow Flight in: a flight's endpoints as partitions, read without decoding.

:class:`FlightSource` asks the server for a flight (``GetFlightInfo`` on a descriptor
path) and reads each endpoint's DoGet stream as one partition. Rows that carry the
``_twg_`` locator columns (a :class:`~thalweg_bytewax.flight.table_server.TableServer`
serving what a ``FlightSink`` stored) keep them and are keyed by their source
partition, so an epoch sink downstream skips what it holds; other rows are numbered:
topic the flight's name, partition the endpoint's index, offset the row's number.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pyarrow as pa
import pyarrow.flight as flight
from bytewax.inputs import FixedPartitionedSource
from typing_extensions import override

from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.flight.protocol import call_options, shown_location
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime.parts import announce_listing, decode_part, encode_part

from ._source_partition import FlightEndpointPartition
from .config import FlightSourceConfig

__all__ = ["FlightSource"]

logger = logging.getLogger(__name__)


class FlightSource(FixedPartitionedSource[KeyedBatch, int]):
    """Read a flight's endpoints from an Arrow Flight server as keyed batches.

    Endpoints are the unit of parallelism: one partition each, named
    ``"<path>:<index>"``, listed once when the flow starts (the server must list the
    same endpoints, in the same order, on a restart). The state is the number of rows
    a partition emitted; a resumed run reads the endpoint again and skips them, so the
    server must serve the same rows for a ticket each time. Exactly-once with an epoch
    sink downstream. Each partition reads ahead at most ``max_queued_batches`` batches
    on a background thread; ``next_batch`` never blocks.

    Example::

        flow = Dataflow("from_flight")
        batches = op.input("in", flow, FlightSource("grpc://127.0.0.1:8815", ["orders"]))
        op.output("lane", batches, ParquetSink("lake/raw"))

    Args:
        location: The server, ``grpc://host:port``.
        path: The flight's descriptor path (a name, or a list of names).
        max_queued_batches: Batches read ahead per partition.
        timeout: The deadline of ``GetFlightInfo`` and of each endpoint's whole read.
        token: A bearer token (a ``${env:NAME}`` reference or a value); never printed.
        metadata_prefix: Prefix of the metadata columns.
    """

    def __init__(
        self,
        location: str,
        path: str | list[str],
        *,
        max_queued_batches: int = 8,
        timeout: timedelta | None = None,
        token: str | None = None,
        metadata_prefix: str = DEFAULT_PREFIX,
    ) -> None:
        values: dict[str, object] = {
            "location": location,
            "path": [path] if isinstance(path, str) else list(path),
            "max_queued_batches": max_queued_batches,
            "token": token,
            "metadata_prefix": metadata_prefix,
        }
        if timeout is not None:
            values["timeout"] = timeout
        self.config = FlightSourceConfig.build(values)
        self.name = "/".join(self.config.path)
        self._info: flight.FlightInfo | None = None
        self._lock = threading.Lock()

    def _options(self) -> flight.FlightCallOptions:
        token = self.config.token.resolve() if self.config.token is not None else None
        return call_options(self.config.timeout.total_seconds(), token)

    def endpoints(self) -> list[flight.FlightEndpoint]:
        """The flight's endpoints, asked once."""
        with self._lock:
            if self._info is None:
                where = f"{self.config.component} `{shown_location(self.config.location)}`"
                descriptor = flight.FlightDescriptor.for_path(*self.config.path)
                try:
                    with flight.FlightClient(self.config.location) as client:
                        self._info = client.get_flight_info(descriptor, options=self._options())
                except (flight.FlightError, pa.ArrowException, OSError) as exc:
                    msg = (
                        f"{where}: asking for flight `{self.name}` failed "
                        f"({type(exc).__name__}); check the location, the path and the token"
                    )
                    raise SourceError(msg) from exc
                if not self._info.endpoints:
                    logger.warning("%s: flight `%s` has no endpoint", where, self.name)
            return list(self._info.endpoints)

    @override
    def list_parts(self) -> list[str]:
        return announce_listing([encode_part(self.name, i) for i in range(len(self.endpoints()))])

    @override
    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> FlightEndpointPartition:
        _, index = decode_part(for_part)
        endpoints = self.endpoints()
        if index >= len(endpoints):
            msg = (
                f"{self.config.component}: partition `{for_part}` has no endpoint now (the "
                f"flight lists {len(endpoints)}); the server must list the same endpoints "
                "on a restart"
            )
            raise SourceError(msg)
        endpoint = endpoints[index]
        location = self.config.location
        if endpoint.locations:  # an endpoint served elsewhere names its location
            location = endpoint.locations[0].uri.decode()
        return FlightEndpointPartition(
            component=self.config.component,
            location=location,
            ticket=endpoint.ticket,
            name=self.name,
            index=index,
            options=self._options(),
            columns=self.config.columns,
            max_queued=self.config.max_queued_batches,
            skip=resume_state or 0,
        )
