"""Rows (dicts, dataclasses, pydantic models, tuples) to one Arrow batch, bad rows to the DLQ.

The happy path is batch-wide: a list of dicts goes to ``pa.RecordBatch.from_pylist`` in
one call, and the checks pyarrow does not make run over the batch in C (key-set union
and intersection, the Python types seen per field, null counts). Only when a check finds
a problem, or the conversion raises, are single rows looked at: a failed conversion is
bisected down to the rows that fail, so ``k`` bad rows in ``n`` cost about
``k * log2(n)`` conversions of shrinking slices.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from datetime import date, time
from operator import methodcaller
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from thalweg_bytewax.lanes.dlq import RejectReason, dlq_batch_from_rows
from thalweg_bytewax.operators._conversion_checks import lossy_check, null_violations
from thalweg_bytewax.operators._first_rejects import FirstRejects
from thalweg_bytewax.records.ids import record_ids_array
from thalweg_bytewax.records.metadata import MetadataColumns

__all__ = ["Converted", "RowConverter"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Converted:
    """One gathering of rows, converted: the good rows and the DLQ rows (either may be None)."""

    ok: pa.RecordBatch | None
    rejected: pa.RecordBatch | None


def _as_mapping(item: Any, names: list[str]) -> Mapping[str, Any]:
    """The row of an item, or raise ``TypeError`` saying why it has none."""
    if type(item) is dict:
        return item
    if isinstance(item, Mapping):
        return dict(item)
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return dataclasses.asdict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        row = dump()
        if isinstance(row, Mapping):
            return row
    if isinstance(item, tuple):
        if len(item) != len(names):
            msg = f"expected a tuple of {len(names)} values (one per schema field); got {len(item)}"
            raise TypeError(msg)
        return dict(zip(names, item, strict=True))
    msg = f"expected a dict, dataclass, pydantic model or tuple; got {type(item).__name__}"
    raise TypeError(msg)


def _iso(value: Any) -> str:
    # Dates and times go through isoformat: orjson 3.13 drops a leading zero of a time's
    # fraction when its microseconds are 10000..99999 ("01:02:03.16000" for .016000).
    if isinstance(value, date | time):
        return value.isoformat()
    return str(value)


def _json(row: Any) -> str:
    """The row as JSON text for the DLQ, whatever it holds."""
    try:
        option = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
        return orjson.dumps(row, default=_iso, option=option).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(repr(row))


class RowConverter:
    """Converts gathered rows against one schema; shared by the buckets of a step.

    Args:
        step_id: The step, in messages and DLQ rows.
        schema: The schema of the batches.
        topic: With a counter locator, the ``source_topic`` value; None for no locator.
        columns: Metadata column names.
        missing_fields: ``"reject"`` or ``"null"``.
        extra_fields: ``"reject"`` or ``"ignore"``.
    """

    def __init__(
        self,
        step_id: str,
        schema: pa.Schema,
        *,
        topic: str | None,
        columns: MetadataColumns,
        missing_fields: str,
        extra_fields: str,
    ) -> None:
        self.step_id = step_id
        self.schema = schema
        self.topic = topic
        self.columns = columns
        self.names = list(schema.names)
        self._name_set = frozenset(self.names)
        self._reject_missing = missing_fields == "reject"
        self._reject_extra = extra_fields == "reject"
        self._lossy = [(f, c) for f in schema if (c := lossy_check(f.type)) is not None]
        self._first_rejects = FirstRejects(
            logger, "to_batches", "row(s) that do not fit the schema"
        )

    def convert(self, items: Sequence[Any], partition: int, first_offset: int) -> Converted:
        """Convert rows whose offsets (with a counter locator) start at ``first_offset``."""
        bad: dict[int, str] = {}
        if set(map(type, items)) == {dict}:
            rows: list[Any] = list(items)
        else:
            rows = list(items)
            for i, item in enumerate(items):
                try:
                    rows[i] = _as_mapping(item, self.names)
                except Exception as exc:  # noqa: BLE001 - any failure makes the row bad
                    bad[i] = f"is no row: {exc}"
        pos = [i for i in range(len(rows)) if i not in bad] if bad else list(range(len(rows)))
        self._check_fields(rows, pos, bad)
        if bad:  # filtering costs a pass over the rows: only when a check found one
            pos = [i for i in pos if i not in bad]
        self._check_lossy(rows, pos, bad)
        if bad:
            pos = [i for i in pos if i not in bad]
        batch, pos = self._to_batch(rows, pos, bad)
        batch, pos = self._check_nulls(batch, pos, bad)
        ok = self._with_locator(batch, pos, partition, first_offset) if pos else None
        rejected = self._rejected(items, rows, bad, partition, first_offset) if bad else None
        return Converted(ok, rejected)

    # -- checks pyarrow does not make ------------------------------------------------

    def _check_fields(self, rows: list[Any], pos: list[int], bad: dict[int, str]) -> None:
        """Missing and unknown top-level fields, found over the batch's key sets."""
        live = [rows[i] for i in pos] if len(pos) != len(rows) else rows
        if not live:
            return
        extra: set[Any] = set().union(*live) - self._name_set if self._reject_extra else set()
        missing: set[str] = set()
        if self._reject_missing:
            missing = set(self._name_set.difference(self._name_set.intersection(*live)))
        if not extra and not missing:
            return
        for i in pos:  # only batches with a bad row get here
            keys = rows[i].keys()
            lacks = [n for n in self.names if n in missing and n not in keys]
            unknown = sorted(str(k) for k in keys - self._name_set) if extra else []
            if lacks:
                bad[i] = (
                    f"lacks field(s) {_ticks(lacks)}; expected every schema field (None for "
                    f"a null, or missing_fields='null')"
                )
            elif unknown:
                bad[i] = (
                    f"has field(s) {_ticks(unknown)} the schema lacks; expected only schema "
                    f"fields (add them to the schema, or extra_fields='ignore')"
                )

    def _check_lossy(self, rows: list[Any], pos: list[int], bad: dict[int, str]) -> None:
        """Values pyarrow would convert with a loss (it truncates silently)."""
        live = [rows[i] for i in pos] if len(pos) != len(rows) else rows
        for field, (suspect, lost) in self._lossy:
            get = methodcaller("get", field.name)
            if not any(issubclass(t, suspect) for t in set(map(type, map(get, live)))):
                continue
            for i in pos:
                value = rows[i].get(field.name)
                if isinstance(value, suspect) and lost(value):
                    bad.setdefault(
                        i,
                        (
                            f"field `{field.name}`: expected a value {field.type} holds without "
                            f"a loss; got {value!r}"
                        ),
                    )

    def _to_batch(
        self, rows: list[Any], pos: list[int], bad: dict[int, str]
    ) -> tuple[pa.RecordBatch, list[int]]:
        """Convert the rows at ``pos``; bisect a failing conversion to its bad rows."""
        live = [rows[i] for i in pos] if len(pos) != len(rows) else rows
        parts: list[pa.RecordBatch] = []
        kept: list[int] = []
        stack = [(0, len(live))] if live else []
        while stack:
            lo, hi = stack.pop()
            try:
                parts.append(pa.RecordBatch.from_pylist(live[lo:hi], schema=self.schema))
            except Exception as exc:  # noqa: BLE001 - pyarrow raises many kinds on bad data
                if hi - lo == 1:
                    bad[pos[lo]] = f"does not fit the schema: {exc}"
                else:
                    mid = (lo + hi) // 2
                    stack += [(mid, hi), (lo, mid)]  # the left half first: keep row order
                continue
            kept.extend(pos[lo:hi])
        if not parts:
            return _empty(self.schema), []
        batch = parts[0] if len(parts) == 1 else pa.concat_batches(parts)
        return batch, kept

    def _check_nulls(
        self, batch: pa.RecordBatch, pos: list[int], bad: dict[int, str]
    ) -> tuple[pa.RecordBatch, list[int]]:
        """Nulls in non-nullable fields (pyarrow fills them in for absent values)."""
        if not pos:
            return batch, pos
        mask: np.ndarray | None = None
        first_field: dict[int, str] = {}
        for field, column in zip(self.schema, batch.columns, strict=True):
            for name, nulls in null_violations(field, column):
                hit = np.asarray(nulls.to_numpy(zero_copy_only=False), dtype=bool)
                if not hit.any():
                    continue
                for row in np.flatnonzero(hit).tolist():
                    first_field.setdefault(row, name)
                mask = hit if mask is None else (mask | hit)
        if mask is None:
            return batch, pos
        for j, name in first_field.items():
            bad[pos[j]] = (
                f"field `{name}` is null; expected a value (the schema declares it non-nullable)"
            )
        keep = ~mask
        return batch.filter(pa.array(keep)), [p for p, k in zip(pos, keep, strict=True) if k]

    # -- outputs -------------------------------------------------------------------------

    def _with_locator(
        self, batch: pa.RecordBatch, pos: list[int], partition: int, first_offset: int
    ) -> pa.RecordBatch:
        if self.topic is None:
            return batch
        n = batch.num_rows
        cols = self.columns
        # Without rejects the rows are 0..n-1 of the gathering: no list to convert.
        at = np.arange(n, dtype=np.int64) if n == pos[-1] + 1 else np.asarray(pos, np.int64)
        offsets = pa.array(at + first_offset, pa.int64())
        return pa.RecordBatch.from_arrays(
            [
                *batch.columns,
                pa.array([self.topic] * n, pa.string()),
                pa.array(np.full(n, partition, dtype=np.int32), pa.int32()),
                offsets,
            ],
            schema=self.schema.append(pa.field(cols.source_topic, pa.string()))
            .append(pa.field(cols.source_partition, pa.int32()))
            .append(pa.field(cols.source_offset, pa.int64())),
        )

    def _rejected(
        self,
        items: Sequence[Any],
        rows: list[Any],
        bad: dict[int, str],
        partition: int,
        first_offset: int,
    ) -> pa.RecordBatch:
        # Only rejected rows reach this: a per-row loop here is bounded by the rejects.
        idx = sorted(bad)
        texts = [_json(rows[i] if isinstance(rows[i], Mapping) else items[i]) for i in idx]
        cols = self.columns
        if self.topic is not None:
            where = [f"`{self.topic}:{partition}@{first_offset + i}`" for i in idx]
        else:
            where = [f"row {i} of a batch of {len(items)}" for i in idx]
        messages = [
            f"to_batches `{self.step_id}`: row at {w}: {bad[i]}"
            for w, i in zip(where, idx, strict=True)
        ]
        arrays: dict[str, pa.Array] = {
            cols.source_value: pa.array([t.encode() for t in texts], pa.binary())
        }
        if self.topic is not None:
            k = len(idx)
            arrays[cols.source_topic] = pa.array([self.topic] * k, pa.string())
            arrays[cols.source_partition] = pa.array([partition] * k, pa.int32())
            offsets = pa.array([first_offset + i for i in idx], pa.int64())
            arrays[cols.source_offset] = offsets
            # The sinks check replayed rows against what they hold by record id.
            arrays[cols.record_id] = record_ids_array(
                None, self.topic, partition, offsets, arrays[cols.source_value]
            )
        source = pa.RecordBatch.from_pydict(arrays)
        self._first_rejects.log(self.step_id, messages[0])
        return dlq_batch_from_rows(
            source,
            range(len(idx)),
            reason=RejectReason.CONTRACT,
            step_id=self.step_id,
            messages=messages,
            row_json=texts,
            columns=cols,
        )


def _ticks(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)
