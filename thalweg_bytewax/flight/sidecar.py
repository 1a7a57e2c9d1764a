"""The reference sidecar: a Flight server that runs one function over each batch it gets.

``thalweg sidecar serve MODULE:FUNCTION --port 8815`` runs it; a function takes a
``pyarrow.RecordBatch`` (the step's rows with their ``_twg_`` columns) and returns one.
Keep the request's ``_twg_`` locator columns in what it returns (append columns to the
batch it got, or take rows from it), so
:func:`~thalweg_bytewax.operators.flight_transform` can check that no row was dropped or
reordered::

    def score(batch: pa.RecordBatch) -> pa.RecordBatch:
        amount = batch.column("amount")
        return batch.append_column("score", pc.multiply(amount, 0.5))

The protocol is one DoExchange per batch: the client writes one batch and ends its
side; the server answers the function's batch. A function that raises fails the call
(the step retries it, then dead-letters the batch).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
from typing_extensions import override

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.flight._local_server import LocalFlightServer

__all__ = ["BatchFunction", "SidecarServer", "load_function"]

logger = logging.getLogger(__name__)

BatchFunction = Callable[[pa.RecordBatch], pa.RecordBatch]
"""A sidecar's work: a record batch in, a record batch out."""


def load_function(spec: str) -> BatchFunction:
    """The function ``MODULE:FUNCTION`` names (``my_models.scoring:score``).

    Raises:
        ConfigError: When the spec has no ``:``, the module cannot be imported, or the
            name is missing or not callable.
    """
    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name:
        msg = f"sidecar: expected MODULE:FUNCTION (e.g. 'my_models.scoring:score'); got {spec!r}"
        raise ConfigError(msg)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        msg = f"sidecar: cannot import module `{module_name}` ({exc}); is it on PYTHONPATH?"
        raise ConfigError(msg) from exc
    function = getattr(module, name, None)
    if not callable(function):
        msg = f"sidecar: `{module_name}` has no function `{name}`"
        raise ConfigError(msg)
    return function  # type: ignore[no-any-return]


class SidecarServer(LocalFlightServer):
    """Answer each DoExchange's batch with ``function(batch)``.

    Args:
        function: The work (see the module).
        location: Where to listen; port 0 picks a free one (read :attr:`port`).
    """

    thread_name = "twg-sidecar"

    def __init__(self, function: BatchFunction, location: str = "grpc://127.0.0.1:0") -> None:
        super().__init__(location)
        self.function = function
        self.batches = 0
        """Batches answered."""

    @override
    def do_exchange(
        self,
        context: Any,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.MetadataRecordBatchWriter,
    ) -> None:
        table = reader.read_all().combine_chunks()
        batches = table.to_batches()
        request = batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)
        reply = self.function(request)
        if not isinstance(reply, pa.RecordBatch):
            msg = f"sidecar: the function returned {type(reply).__name__}; expected a RecordBatch"
            raise flight.FlightServerError(msg)
        writer.begin(reply.schema)
        writer.write_batch(reply)
        self.batches += 1
