"""``flight_transform``: each batch through a sidecar over Arrow Flight, checked by locator.

Users run their own code out of process (model inference, a callout to a service) in a
*sidecar*: a Flight server that answers each batch with a batch
(:mod:`thalweg_bytewax.flight.sidecar` is the reference one, ``thalweg sidecar serve``).
Each keyed batch goes out with its ``_twg_`` metadata columns in one DoExchange; the
reply is checked by locator (:mod:`thalweg_bytewax.flight.locators`: a row dropped,
reordered or invented is refused with :class:`~thalweg_bytewax.errors.SidecarError`,
which stops the flow) and comes out with the request's metadata columns.

Failures follow the retry axis: a timeout, the sidecar down or its code raising is a
:class:`~thalweg_bytewax.errors.SidecarTransientError`, retried ``retries`` times with
doubling backoff; then the batch goes to ``rejected`` as DLQ rows with reason
``retry_exhausted`` and a message naming the failure. A circuit breaker opens after
``failures_to_open`` consecutive failed calls: while it is open, batches go to the DLQ
at once (message "circuit open"), and after ``cool_down`` one call probes the sidecar.
Batches Bytewax hands over together go out concurrently over a small client pool.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

import bytewax.operators as op
import pyarrow as pa
import pyarrow.flight as flight
from bytewax.dataflow import operator
from bytewax.operators import KeyedStream

from thalweg_bytewax.errors import ConfigError, SidecarError, SidecarTransientError
from thalweg_bytewax.flight.breaker import CircuitBreaker
from thalweg_bytewax.flight.locators import RowMapping, checked_reply, require_locators
from thalweg_bytewax.flight.pool import FlightClientPool
from thalweg_bytewax.flight.protocol import call_options, shown_location
from thalweg_bytewax.lanes.dlq import RejectReason, dlq_whole_batch
from thalweg_bytewax.operators._outcome import NOTHING, BatchOutcome, split_outcomes
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns, metadata_columns

__all__ = ["FlightTransformOut", "flight_transform"]

logger = logging.getLogger(__name__)

# Flight errors worth a retry: the call ran out of time, the sidecar is down or
# restarting, or its code raised (classified by type, never by message text).
_TRANSIENT = (
    flight.FlightTimedOutError,
    flight.FlightUnavailableError,
    flight.FlightCancelledError,
    flight.FlightServerError,
    flight.FlightInternalError,
    ConnectionError,
    TimeoutError,
)


@dataclass(frozen=True)
class FlightTransformOut:
    """The streams of :func:`flight_transform`, both keyed like the input.

    Attributes:
        ok: The sidecar's batches: its columns, then the request's metadata columns.
        rejected: DLQ batches (reason ``retry_exhausted``) of the batches the sidecar
            could not answer within the retries, or that met an open breaker.
    """

    ok: KeyedStream[pa.RecordBatch]
    rejected: KeyedStream[pa.RecordBatch]


class _Caller:
    """The per-batch work of :func:`flight_transform`, shared by the workers of a process."""

    def __init__(
        self,
        step_id: str,
        location: str,
        *,
        rows: RowMapping,
        timeout: timedelta,
        retries: int,
        retry_backoff: timedelta,
        breaker: CircuitBreaker,
        pool_size: int,
        token: str | None,
        command: bytes,
        columns: MetadataColumns,
    ) -> None:
        self.step_id = step_id
        self.where = f"flight_transform `{step_id}` at `{shown_location(location)}`"
        self.rows: RowMapping = rows
        self.retries = retries
        self.backoff_s = retry_backoff.total_seconds()
        self.breaker = breaker
        self.pool = FlightClientPool(location, size=pool_size)
        self.options = call_options(timeout.total_seconds(), token)
        self.descriptor = flight.FlightDescriptor.for_command(command)
        self.columns = columns
        self._threads = ThreadPoolExecutor(pool_size, thread_name_prefix="twg-sidecar")

    def run_many(self, items: list[tuple[str, pa.RecordBatch]]) -> list[tuple[str, BatchOutcome]]:
        """Answer the batches Bytewax hands over at once, concurrently, in order."""
        if len(items) == 1:
            return [(items[0][0], self.run(items[0][1]))]
        answers = list(self._threads.map(self.run, [batch for _, batch in items]))
        return [(key, a) for (key, _), a in zip(items, answers, strict=True)]

    def run(self, batch: pa.RecordBatch) -> BatchOutcome:
        """One batch: call with retries, check the reply, or dead-letter it."""
        if batch.num_rows == 0:
            return NOTHING
        require_locators(batch, self.columns, self.where)
        failure, attempts = "", 0
        for attempt in range(self.retries + 1):
            if not self.breaker.allow():
                failure = (
                    f"circuit open after {self.breaker.failures_to_open} consecutive failures; "
                    f"probing again {self.breaker.cool_down_s:g} s after it opened"
                )
                break
            attempts += 1
            try:
                reply = self._call(batch)
            except SidecarTransientError as exc:
                self.breaker.failure()
                failure = exc.message
                if attempt < self.retries:
                    time.sleep(self.backoff_s * 2**attempt)
                continue
            self.breaker.success()
            ok = checked_reply(batch, reply, self.columns, rows=self.rows, where=self.where)
            return BatchOutcome(ok if ok.num_rows else None, None)
        tried = f" on each of {attempts} attempts" if attempts > 1 else ""
        message = f"{self.where}: {failure}{tried}"
        logger.warning("%s; %d rows to the DLQ", message, batch.num_rows)
        rejected = dlq_whole_batch(
            batch,
            reason=RejectReason.RETRY_EXHAUSTED,
            step_id=self.step_id,
            message=message,
            columns=self.columns,
        )
        return BatchOutcome(None, rejected)

    def _call(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        try:
            with self.pool.client() as client:
                writer, reader = client.do_exchange(self.descriptor, options=self.options)
                with writer:
                    writer.begin(batch.schema)
                    writer.write_batch(batch)
                    writer.done_writing()
                    table = reader.read_all()
        except _TRANSIENT as exc:
            msg = f"call failed ({type(exc).__name__})"
            raise SidecarTransientError(msg) from exc
        except (flight.FlightError, pa.ArrowException) as exc:
            msg = (
                f"{self.where}: call refused ({type(exc).__name__}); check the sidecar's "
                "location, token and log"
            )
            raise SidecarError(msg) from exc
        batches = table.combine_chunks().to_batches()
        if batches:
            return batches[0]
        return pa.RecordBatch.from_pylist([], schema=table.schema)


@operator
def flight_transform(
    step_id: str,
    up: KeyedStream[pa.RecordBatch],
    *,
    location: str,
    rows: RowMapping = "one_to_one",
    timeout: timedelta = timedelta(seconds=30),
    retries: int = 3,
    retry_backoff: timedelta = timedelta(milliseconds=200),
    failures_to_open: int = 5,
    cool_down: timedelta = timedelta(seconds=30),
    pool_size: int = 2,
    token: str | None = None,
    command: bytes | str = b"",
    metadata_prefix: str = DEFAULT_PREFIX,
) -> FlightTransformOut:
    """Send each keyed batch to a Flight sidecar and emit its answer, checked by locator.

    The key (the source partition) is kept on both outputs, so epoch sinks consume them
    directly. The reply must keep each row's locator columns, in request order:
    ``rows="one_to_one"`` asks one reply row per request row, ``"one_to_many"`` lets a
    row become a run of several that repeat its locator (they share its record id and
    offset, so a sink takes them as one source record: a replay writes them again or
    skips them together). A row dropped, reordered or invented stops the flow with a
    :class:`~thalweg_bytewax.errors.SidecarError` naming the row. See the module for the
    retries, the DLQ and the circuit breaker.

    ```python
    import bytewax.operators as op
    import thalweg_bytewax.operators as twg

    scored = twg.flight_transform("score", orders.ok, location="grpc://127.0.0.1:8815")
    op.output("scored", scored.ok, ParquetSink("lake/scored"))
    op.output("dlq", scored.rejected, ParquetSink("lake/dlq"))
    ```

    Args:
        step_id: Unique step id.
        up: Keyed batches with their locator columns.
        location: The sidecar, ``grpc://host:port`` (``grpc+tls://`` for TLS).
        rows: ``"one_to_one"`` or ``"one_to_many"``.
        timeout: The deadline of one call.
        retries: Calls retried after a transient failure before the DLQ.
        retry_backoff: The first pause between attempts (doubling).
        failures_to_open: Consecutive failed calls that open the breaker.
        cool_down: How long the breaker stays open before one call probes.
        pool_size: Clients kept open, and batches sent at once.
        token: A bearer token sent as the ``authorization`` header; never printed.
        command: The DoExchange descriptor's command (for a sidecar serving several).
        metadata_prefix: Prefix of the metadata columns.

    Returns:
        ``FlightTransformOut(ok, rejected)``.

    Raises:
        ConfigError: At build time, for a bad location, mapping or count.
    """
    where = f"flight_transform `{step_id}`"
    columns = metadata_columns(metadata_prefix, where)
    if not location.startswith(("grpc://", "grpc+tcp://", "grpc+tls://", "grpc+unix://")):
        msg = f"{where}: expected a location such as 'grpc://host:8815'; got {location!r}"
        raise ConfigError(msg)
    if rows not in ("one_to_one", "one_to_many"):
        msg = f"{where}: expected rows 'one_to_one' or 'one_to_many'; got {rows!r}"
        raise ConfigError(msg)
    if retries < 0 or failures_to_open < 1 or pool_size < 1:
        msg = f"{where}: expected retries >= 0, failures_to_open >= 1 and pool_size >= 1"
        raise ConfigError(msg)
    caller = _Caller(
        step_id,
        location,
        rows=rows,
        timeout=timeout,
        retries=retries,
        retry_backoff=retry_backoff,
        breaker=CircuitBreaker(failures_to_open, cool_down),
        pool_size=pool_size,
        token=token,
        command=command.encode() if isinstance(command, str) else command,
        columns=columns,
    )
    answered = op.flat_map_batch("call", up, caller.run_many)
    ok, rejected = split_outcomes(answered)
    return FlightTransformOut(ok=ok, rejected=rejected)
