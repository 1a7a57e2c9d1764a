"""Private: what one batch became in an operator that rejects rows, and the two streams.

``decode``, ``flight_transform``, ``wasm_map`` and ``wasm_sql`` map each batch to a
:class:`BatchOutcome` (its good rows, its DLQ rows, either possibly absent), then
:func:`split_outcomes` turns the stream of outcomes into their ``ok`` and ``rejected``
streams; :func:`map_outcomes` does both for a step that maps one batch at a time;
:func:`rejected_whole` is a batch a WebAssembly function failed on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import bytewax.operators as op
import pyarrow as pa
from bytewax.operators import KeyedStream

from thalweg_bytewax.lanes.dlq import RejectReason, dlq_whole_batch
from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.udf.failures import WasmUdfError

__all__ = ["NOTHING", "BatchOutcome", "map_outcomes", "rejected_whole", "split_outcomes"]


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """One batch's good rows and its DLQ rows; None where there are none."""

    ok: pa.RecordBatch | None
    rejected: pa.RecordBatch | None


NOTHING = BatchOutcome(None, None)
"""The outcome of an empty batch."""


def split_outcomes(
    outcomes: KeyedStream[BatchOutcome],
) -> tuple[KeyedStream[pa.RecordBatch], KeyedStream[pa.RecordBatch]]:
    """The ``ok`` and ``rejected`` streams of ``outcomes``, keyed alike (steps of those ids)."""
    ok = op.filter_map_value("ok", outcomes, lambda o: o.ok)
    rejected = op.filter_map_value("rejected", outcomes, lambda o: o.rejected)
    return ok, rejected


def map_outcomes(
    up: KeyedStream[pa.RecordBatch], run: Callable[[pa.RecordBatch], BatchOutcome]
) -> tuple[KeyedStream[pa.RecordBatch], KeyedStream[pa.RecordBatch]]:
    """The ``ok`` and ``rejected`` streams of ``run`` over each batch (steps of those ids).

    ``run`` sees only batches with rows (an empty batch is :data:`NOTHING`), in a step
    ``run``.
    """

    def outcome(batch: pa.RecordBatch) -> BatchOutcome:
        return run(batch) if batch.num_rows else NOTHING

    return split_outcomes(op.map_value("run", up, outcome))


def rejected_whole(
    batch: pa.RecordBatch,
    error: WasmUdfError,
    *,
    operator: str,
    step_id: str,
    columns: MetadataColumns,
) -> tuple[str, pa.RecordBatch]:
    """A batch a WebAssembly function failed on, every row to the DLQ (reason ``udf``).

    Args:
        batch: The batch the function failed on.
        error: The function's failure.
        operator: The operator, as the message names it with its step id (``wasm_sql``).
        step_id: The operator's step id.
        columns: The metadata column names.

    Returns:
        The message (to log) and the DLQ rows, each carrying it.
    """
    message = (
        f"{operator} `{step_id}`: {error}; the batch of {batch.num_rows} rows is rejected whole"
    )
    rejected = dlq_whole_batch(
        batch, reason=RejectReason.UDF, step_id=step_id, message=message, columns=columns
    )
    return message, rejected
