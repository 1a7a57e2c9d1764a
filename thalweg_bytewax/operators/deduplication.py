"""``dedup``: drop records already seen within a window, by record id or natural key.

By record id (``_twg_record_id``) it absorbs broker redelivery and replay: the same
record read twice has the same id. By natural key it absorbs an upstream producer retry
that republishes the same business record at a new offset (ADR-0054); that is only safe
when the contract declares the natural key, so it is refused at build time otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from bytewax.dataflow import operator
from bytewax.operators import KeyedStream, StatefulLogic
from typing_extensions import override

from thalweg_bytewax.contracts.kernels import duplicate_mask
from thalweg_bytewax.contracts.spec import ContractSpec
from thalweg_bytewax.dedup.key_memory import SeenWindow, key_values
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.operators._routing import stateful_on_reading_worker
from thalweg_bytewax.records.metadata import (
    DEFAULT_COLUMNS,
    DEFAULT_PREFIX,
    MetadataColumns,
    metadata_columns,
)
from thalweg_bytewax.records.required_columns import require_columns
from thalweg_bytewax.windows.event_time import DEFAULT_ALLOWED_SKEW, EventClock, check_allowed_skew

__all__ = ["dedup"]


class _DedupLogic(StatefulLogic[pa.RecordBatch, pa.RecordBatch, tuple[Any, ...]]):
    def __init__(
        self,
        key_columns: tuple[str, ...],
        window: timedelta,
        time_column: str | None,
        resume_state: tuple[Any, ...] | None,
        *,
        step_id: str = "dedup",
        allowed_skew: timedelta = DEFAULT_ALLOWED_SKEW,
        ingest_column: str = DEFAULT_COLUMNS.ingest_ts,
    ) -> None:
        self._key_columns = key_columns
        self._clock = EventClock(
            f"dedup `{step_id}`",
            time_column,
            allowed_skew=allowed_skew,
            ingest_column=ingest_column,
        )
        self._seen = SeenWindow(window, resume_state, allowed_skew=allowed_skew)

    @property
    def clamped(self) -> int:
        """Records whose event time was clamped to ingest time + allowed skew."""
        return self._clock.clamped

    @override
    def on_item(self, value: pa.RecordBatch) -> tuple[list[pa.RecordBatch], bool]:
        out = self.filter(value)
        return ([out] if out is not None else [], StatefulLogic.RETAIN)

    def filter(self, batch: pa.RecordBatch) -> pa.RecordBatch | None:
        n = batch.num_rows
        if n == 0:
            return None
        require_columns(batch, self._key_columns, where="dedup", kind="key")
        # In-batch duplicates, columnar (never flags a null key); only the distinct,
        # non-null keys of the batch consult the window.
        drop = duplicate_mask(batch, self._key_columns)
        candidates = ~drop
        for c in self._key_columns:
            col = batch.column(c)
            if col.null_count:  # a null key cannot be compared: pass it, never remember it
                candidates &= np.asarray(col.is_valid().to_numpy(zero_copy_only=False), bool)
        rows = np.flatnonzero(candidates)
        keys = key_values(batch, self._key_columns, rows)
        now, times = self._clock(batch)
        row_times = None
        if times is not None:
            row_times = times.take(pa.array(rows, pa.int64())).to_numpy(zero_copy_only=False)
        hits = self._seen.check_and_add(keys, now, row_times)
        drop[rows[hits]] = True
        if not drop.any():
            return batch
        if drop.all():
            return None
        return batch.filter(pa.array(~drop))

    @override
    def snapshot(self) -> tuple[Any, ...]:
        return self._seen.snapshot()


def _key_columns(
    by: Literal["record_id", "natural_key"] | Sequence[str],
    contract: ContractSpec | None,
    object_name: str | None,
    columns: MetadataColumns,
    step_id: str,
) -> tuple[str, ...]:
    if by == "record_id":
        return (columns.record_id,)
    natural = contract.natural_key(object_name) if contract is not None else ()
    if not natural:
        msg = (
            f"dedup `{step_id}`: content dedup by {by!r} needs a contract that declares a "
            "natural key (primaryKey or unique); got "
            + ("no contract" if contract is None else f"contract `{contract.source}` without one")
            + ". Deduplicate by='record_id', or declare the key in the contract (ADR-0054)"
        )
        raise ConfigError(msg)
    if by == "natural_key":
        return natural
    wanted = (by,) if isinstance(by, str) else tuple(by)
    if set(wanted) != set(natural):
        msg = (
            f"dedup `{step_id}`: expected the contract's natural key {list(natural)!r}; got "
            f"{list(wanted)!r}. Deduplicate by='natural_key' (ADR-0054)"
        )
        raise ConfigError(msg)
    return natural


@operator
def dedup(
    step_id: str,
    up: KeyedStream[pa.RecordBatch],
    *,
    by: Literal["record_id", "natural_key"] | Sequence[str] = "record_id",
    window: timedelta,
    contract: ContractSpec | None = None,
    object_name: str | None = None,
    time_column: str | None = None,
    allowed_skew: timedelta = DEFAULT_ALLOWED_SKEW,
    metadata_prefix: str = DEFAULT_PREFIX,
) -> KeyedStream[pa.RecordBatch]:
    """Pass each record once per window; later copies are dropped.

    Keyed Bytewax state per stream key (the source partition, kept under its routing key
    on the worker that reads it: docs/scaling.md), so the seen keys survive recovery,
    at any worker count: after a resume, replayed records that were already emitted are dropped and
    no unique record is lost. Memory holds the keys of one window per key. In-batch
    duplicates are found columnar; only each batch's distinct keys touch the state.

    Records whose key is null pass through and are never remembered. Content dedup is
    per source partition: a producer that keys by the natural key retries into the same
    partition.

    Event time is the producer's, so it is clamped before it moves the window: a record
    counts at most its ingest time (``<prefix>ingest_ts``, else the processing time)
    plus ``allowed_skew``, and the window's clock is the newest clamped time. A time
    older than the clock (0, negative, years late) never moves it back; its key is
    remembered as if seen at the clock. Keys are remembered for ``window +
    allowed_skew`` of clock time, so a duplicate within ``window`` of honest time is
    dropped even after a future-dated record, and memory holds at most the keys of
    ``window + allowed_skew`` plus one bucket (a sixteenth of the window).

    ```python
    import thalweg_bytewax.operators as twg

    unique = twg.dedup("dedup", batches, by="record_id", window=timedelta(hours=1))
    by_key = twg.dedup(
        "dedup_orders", batches, by="natural_key", window=timedelta(minutes=10),
        contract=contract,
    )
    ```

    Args:
        step_id: Unique step id.
        up: Keyed batches (key = source partition).
        by: ``"record_id"``, ``"natural_key"`` (the contract's), or the natural key's
            column names spelled out.
        window: How long a key is remembered (size it to the upstream retry interval).
        contract: The contract declaring the natural key (required unless by record id).
        object_name: The contract's schema object, if it has several.
        time_column: A timestamp column giving event time; default
            ``<prefix>source_timestamp`` when the batch carries it, else processing time.
        allowed_skew: How far ahead of its ingest time a record's event time may be
            before it is clamped (default one minute). Clamped records are counted and
            logged once each time clamping starts or stops.
        metadata_prefix: Prefix of the metadata columns.

    Returns:
        The keyed batches without the duplicates.

    Raises:
        ConfigError: At build time, for content dedup without a declared natural key,
            or a negative ``allowed_skew``.
    """
    columns = metadata_columns(metadata_prefix, f"dedup `{step_id}`")
    keys = _key_columns(by, contract, object_name, columns, step_id)
    check_allowed_skew(allowed_skew, f"dedup `{step_id}`")
    tcol = time_column or columns.source_timestamp

    def build(resume: tuple[Any, ...] | None) -> _DedupLogic:
        return _DedupLogic(
            keys,
            window,
            tcol,
            resume,
            step_id=step_id,
            allowed_skew=allowed_skew,
            ingest_column=columns.ingest_ts,
        )

    return stateful_on_reading_worker("dedup", up, build)
