"""``to_batches``: any Bytewax stream of rows into keyed Arrow batches with an explicit schema.

Flows built on other sources carry Python objects (dicts, dataclasses, pydantic models,
tuples), one per item. ``to_batches`` gathers them per bucket in Bytewax state, up to
``max_rows`` or ``max_delay``, and converts each gathering with one
``pa.RecordBatch.from_pylist`` call against the schema, so the table and lane sinks take
them like any keyed batch. Rows that do not fit the schema go to a dead-letter stream
with their JSON text; the good rows of the batch still convert. The conversion checks
(missing and unknown fields, nulls in non-nullable fields, lossy conversions) run on the
whole batch and only look at single rows when the batch has a bad one
(``operators/_batch_convert.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import Any, Literal

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Stream, operator
from bytewax.operators import KeyedStream, StatefulBatchLogic
from typing_extensions import override

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.operators._batch_convert import Converted, RowConverter
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, metadata_columns
from thalweg_bytewax.runtime.parts import encode_part, stable_route

__all__ = ["ToBatchesOut", "to_batches"]

logger = logging.getLogger(__name__)

LocatorMode = Literal["counter"]
"""How ``to_batches`` gives rows a locator: ``"counter"`` (a per-bucket offset)."""


@dataclass(frozen=True)
class ToBatchesOut:
    """The streams of :func:`to_batches`, both keyed by bucket (``"<topic>:<bucket>"``).

    Attributes:
        batches: Arrow batches with the schema's columns, followed by the locator
            columns with ``locator="counter"``. At most ``max_rows`` rows each.
        rejected: DLQ batches (:func:`thalweg_bytewax.lanes.dlq.dlq_schema`), reason
            ``contract``, of the rows that do not fit the schema: the message says what
            is wrong, ``row_json`` and the raw value hold the row as JSON, and the
            locator columns are set with ``locator="counter"``.
    """

    batches: KeyedStream[pa.RecordBatch]
    rejected: KeyedStream[pa.RecordBatch]


@dataclass(frozen=True)
class _State:
    """What a bucket keeps in recovery: the rows not yet emitted and the next offset."""

    rows: tuple[Any, ...]
    first_at: datetime | None
    next_offset: int
    partition: int


class _Gather(StatefulBatchLogic[tuple[int, Any], Converted, _State]):
    """One bucket: buffer rows, emit a converted batch per ``max_rows`` or ``max_delay``."""

    def __init__(
        self, convert: RowConverter, max_rows: int, max_delay: timedelta, state: _State | None
    ) -> None:
        self._convert = convert
        self._max_rows = max_rows
        self._max_delay = max_delay
        self._rows: list[Any] = list(state.rows) if state else []
        self._first_at = state.first_at if state else None
        # A bucket's first offset is the wall clock in nanoseconds when it first ran: a
        # fresh run (no recovery state) then never reuses an earlier run's offsets, which
        # the sinks would skip as replays. A resumed bucket continues from its state.
        self._next_offset = state.next_offset if state else time.time_ns()
        self._partition = state.partition if state else 0

    @override
    def on_batch(self, values: list[tuple[int, Any]]) -> tuple[Iterable[Converted], bool]:
        self._partition = values[0][0]
        if not self._rows:
            self._first_at = datetime.now(UTC)
        self._rows.extend(map(itemgetter(1), values))
        out: list[Converted] = []
        while len(self._rows) >= self._max_rows:
            out.append(self._emit(self._max_rows))
        return out, StatefulBatchLogic.RETAIN

    @override
    def on_notify(self) -> tuple[Iterable[Converted], bool]:
        return self._flush(), StatefulBatchLogic.RETAIN

    @override
    def on_eof(self) -> tuple[Iterable[Converted], bool]:
        return self._flush(), StatefulBatchLogic.RETAIN

    @override
    def notify_at(self) -> datetime | None:
        if not self._rows or self._first_at is None:
            return None
        return self._first_at + self._max_delay

    @override
    def snapshot(self) -> _State:
        # A shallow copy: the rows themselves are never changed here.
        return _State(tuple(self._rows), self._first_at, self._next_offset, self._partition)

    def _flush(self) -> list[Converted]:
        return [self._emit(len(self._rows))] if self._rows else []

    def _emit(self, n: int) -> Converted:
        rows, self._rows = self._rows[:n], self._rows[n:]
        first = self._next_offset
        self._next_offset += n
        self._first_at = datetime.now(UTC) if self._rows else None
        return self._convert.convert(rows, self._partition, first)


def _positive_int(step_id: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = f"to_batches `{step_id}`: `{name}` expected an integer >= 1; got {value!r}"
        raise ConfigError(msg)
    return value


def _choice(step_id: str, name: str, value: object, allowed: tuple[object, ...]) -> None:
    if value not in allowed:
        names = " or ".join(repr(a) for a in allowed)
        msg = f"to_batches `{step_id}`: `{name}` expected {names}; got {value!r}"
        raise ConfigError(msg)


@operator
def to_batches(
    step_id: str,
    up: Stream[Any],
    *,
    schema: pa.Schema,
    max_rows: int = 10_000,
    max_delay: timedelta = timedelta(seconds=1),
    key: Callable[[Any], str] | None = None,
    keyed: bool = False,
    partitions: int = 1,
    locator: LocatorMode | None = None,
    topic: str | None = None,
    missing_fields: Literal["reject", "null"] = "reject",
    extra_fields: Literal["reject", "ignore"] = "reject",
    metadata_prefix: str = DEFAULT_PREFIX,
) -> ToBatchesOut:
    """Gather rows from any Bytewax stream into keyed Arrow batches with ``schema``.

    Items are dicts (any mapping), dataclasses, pydantic models (``model_dump()``) or
    tuples (one value per schema field, in order). They are spread over ``partitions``
    buckets by a stable hash of their key (``key(item)``, the upstream key with
    ``keyed=True``, or one bucket for all); each bucket is a Bytewax state that emits a
    batch when it holds ``max_rows`` rows, ``max_delay`` after its oldest row, and at
    the end of a bounded input. Rows of one key stay in order. Both outputs are keyed
    ``"<topic>:<bucket>"`` (``topic`` defaults to ``step_id``), the key the
    epoch-durable sinks route on.

    A row never raises and never becomes NULL silently. It goes to ``rejected`` when a
    field is missing (``missing_fields="null"`` makes missing nullable fields null) or
    unknown (``extra_fields="ignore"`` drops them), a non-nullable field is null, a
    value does not convert to its field's type, or it would convert with a loss (a
    float with a fraction into an integer field, a datetime with a time of day into a
    date field). The other rows of its batch still convert.

    ``locator="counter"`` adds ``<prefix>source_topic`` (``topic``),
    ``<prefix>source_partition`` (the bucket) and ``<prefix>source_offset``, a counter
    per bucket kept in Bytewax state and counted over every row, rejected or not. It
    starts at the wall clock in nanoseconds when the bucket first runs, so a run
    without recovery state never reuses an earlier run's offsets (the sinks would skip
    them as replays); a resumed run continues it from recovery state. Sinks that skip
    replays by offset (``ParquetSink``, the table sinks) then land each row exactly
    once **if the upstream replays the same rows in the same order per bucket after a
    resume** (a deterministic, replayable source on one worker, or keys that each come
    from one source partition). Otherwise replayed rows may get other offsets, and the
    guarantee is at-least-once. Without a locator the sinks' own guarantee for
    locator-less rows applies. DLQ rows carry the locator and a record id.

    ```python
    import bytewax.operators as op
    import pyarrow as pa
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSource

    import thalweg_bytewax.operators as twg

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    flow = Dataflow("users")
    rows = op.input("in", flow, TestingSource([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]))
    out = twg.to_batches("batches", rows, schema=schema, max_rows=1000, locator="counter")
    # out.batches: ("batches:0", RecordBatch(id, name, _twg_source_topic, ...))
    ```

    Args:
        step_id: Unique step id.
        up: A stream of rows, or with ``keyed=True`` a keyed stream of rows.
        schema: The Arrow schema of the batches. Nullability is enforced.
        max_rows: Most rows per batch.
        max_delay: Longest time a row waits in a bucket before its batch is emitted.
        key: For a plain stream, the key of an item; it picks the bucket.
        keyed: ``up`` is a keyed stream; its key picks the bucket.
        partitions: How many buckets (the unit of parallelism downstream).
        locator: ``"counter"`` to add locator columns, or None.
        topic: The bucket keys' and ``source_topic``'s name (default: ``step_id``).
        missing_fields: ``"reject"`` rows that lack a field, or make a missing
            nullable field ``"null"``.
        extra_fields: ``"reject"`` rows with fields the schema lacks, or ``"ignore"``
            those fields.
        metadata_prefix: Prefix of the locator and DLQ metadata columns.

    Returns:
        ``ToBatchesOut(batches, rejected)``.

    Raises:
        ConfigError: At build time, for a bad option, a schema without fields, or a
            schema field under the metadata prefix with ``locator="counter"``.
    """
    what = f"to_batches `{step_id}`"
    columns = metadata_columns(metadata_prefix, what)
    if not isinstance(schema, pa.Schema) or len(schema) == 0:
        msg = f"{what}: `schema` expected a `pyarrow.Schema` with fields; got {schema!r}"
        raise ConfigError(msg)
    max_rows = _positive_int(step_id, "max_rows", max_rows)
    partitions = _positive_int(step_id, "partitions", partitions)
    if not isinstance(max_delay, timedelta) or max_delay <= timedelta(0):
        msg = f"{what}: `max_delay` expected a positive `timedelta`; got {max_delay!r}"
        raise ConfigError(msg)
    _choice(step_id, "locator", locator, ("counter", None))
    _choice(step_id, "missing_fields", missing_fields, ("reject", "null"))
    _choice(step_id, "extra_fields", extra_fields, ("reject", "ignore"))
    if key is not None and (keyed or not callable(key)):
        msg = (
            f"{what}: `key` expected a callable for a plain stream; got {key!r} with "
            f"keyed={keyed!r} (a keyed stream is bucketed by its own key)"
        )
        raise ConfigError(msg)
    name = step_id if topic is None else topic
    if not isinstance(name, str) or not name:
        msg = f"{what}: `topic` expected a non-empty string; got {topic!r}"
        raise ConfigError(msg)
    if locator is not None:
        shadowed = [f.name for f in schema if columns.is_reserved(f.name)]
        if shadowed:
            msg = (
                f"{what}: schema field(s) {', '.join(f'`{s}`' for s in shadowed)} fall under "
                f"the metadata prefix `{columns.prefix}`; expected none with "
                f"locator='counter' (rename them, or pass locator=None to keep them)"
            )
            raise ConfigError(msg)
    buckets = [encode_part(name, i) for i in range(partitions)]
    convert = RowConverter(
        step_id,
        schema,
        topic=name if locator is not None else None,
        columns=columns,
        missing_fields=missing_fields,
        extra_fields=extra_fields,
    )
    logger.info(
        "to_batches %s: %s bucket(s) of at most %s rows or %s; %s",
        step_id,
        partitions,
        max_rows,
        max_delay,
        "counter locator: exactly-once only if the upstream replays the same rows in the "
        "same order per bucket, else at-least-once"
        if locator is not None
        else "no locator: the sink's guarantee for rows without a locator applies",
    )

    def route(k: str) -> int:
        if not isinstance(k, str):
            msg = f"{what}: expected a string key; got {type(k).__name__} {k!r}"
            raise ConfigError(msg)
        return stable_route(k, partitions) if partitions > 1 else 0

    bucketed: KeyedStream[tuple[int, Any]]
    if keyed:
        bucketed = op.map("bucket", up, lambda kv: (buckets[b := route(kv[0])], (b, kv[1])))
    elif key is not None:
        bucketed = op.map("bucket", up, lambda x: (buckets[b := route(key(x))], (b, x)))
    else:
        bucketed = op.map("bucket", up, lambda x: (buckets[0], (0, x)))

    def build(state: _State | None) -> _Gather:
        return _Gather(convert, max_rows, max_delay, state)

    gathered = op.stateful_batch("gather", bucketed, build)
    return ToBatchesOut(
        batches=op.filter_map_value("batches", gathered, lambda c: c.ok),
        rejected=op.filter_map_value("rejected", gathered, lambda c: c.rejected),
    )
