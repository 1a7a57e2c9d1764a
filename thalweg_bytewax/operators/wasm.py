"""``wasm_map`` and ``wasm_sql``: sandboxed WASM functions over keyed Arrow batches.

Both run :class:`~thalweg_bytewax.udf.function.WasmFunction` s (see
:mod:`thalweg_bytewax.udf`): columns cross into the module as Arrow buffers, a chunk
per call, each call fuel-metered and memory-capped in a fresh instance that can reach
nothing outside its buffers. A failure (out of fuel, past the cap, a trap, a non-zero
status) never stops the flow: it sends the rows it concerns to ``rejected``, DLQ batches
(:func:`thalweg_bytewax.lanes.dlq.dlq_schema`) with reason ``udf`` and a message saying
which function, why and on which rows.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import pyarrow as pa
from bytewax.dataflow import operator
from bytewax.operators import KeyedStream

from thalweg_bytewax.coverage.input_span import input_span, input_span_metadata
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.lanes.dlq import RejectReason, dlq_batch_from_rows
from thalweg_bytewax.operators._first_rejects import FirstRejects
from thalweg_bytewax.operators._outcome import BatchOutcome, map_outcomes, rejected_whole
from thalweg_bytewax.operators.sql import sql_node
from thalweg_bytewax.records import DEFAULT_PREFIX, MetadataColumns, metadata_columns
from thalweg_bytewax.records.required_columns import require_columns
from thalweg_bytewax.sql.node import (
    DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
    DEFAULT_SQL_NODE_TIMEOUT_SECONDS,
    SqlNode,
)
from thalweg_bytewax.udf.function import UdfResult, WasmFunction, WasmUdfError

__all__ = ["WasmOut", "wasm_map", "wasm_sql"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WasmOut:
    """The streams of :func:`wasm_map` and :func:`wasm_sql`, keyed like the input.

    Attributes:
        ok: The transformed batches (rows the functions failed on left out).
        rejected: DLQ batches of the rows the functions failed on, reason ``udf``.
    """

    ok: KeyedStream[pa.RecordBatch]
    rejected: KeyedStream[pa.RecordBatch]


def _with_span(
    kept: pa.RecordBatch, batch: pa.RecordBatch, columns: MetadataColumns
) -> pa.RecordBatch:
    """``kept`` standing for all of ``batch``: a sink covers the rejected offsets too."""
    if input_span(batch) is not None:
        return kept  # take / append_column keep the span the batch already carries
    span = input_span_metadata(batch, columns)
    if span is None:
        return kept
    return kept.replace_schema_metadata({**(kept.schema.metadata or {}), **span})


class _Mapper:
    """The per-batch work of :func:`wasm_map`."""

    def __init__(
        self,
        step_id: str,
        function: WasmFunction,
        args: tuple[str, ...],
        output: str,
        columns: MetadataColumns,
    ) -> None:
        self.step_id = step_id
        self.function = function
        self.args = args
        self.output = output
        self.columns = columns
        self._first_rejects = FirstRejects(logger, "wasm_map", "row(s) the function failed on")

    def run(self, batch: pa.RecordBatch) -> BatchOutcome:
        where = f"wasm_map `{self.step_id}`"
        require_columns(batch, self.args, where=where, kind="argument", error=SchemaError)
        result = self.function.apply([batch.column(a) for a in self.args])
        if result.ok is None:
            return BatchOutcome(self._attach(batch, result.values), None)
        kept = batch.take(pa.array(result.ok, pa.int64())) if len(result.ok) else None
        ok = (
            None
            if kept is None
            else _with_span(self._attach(kept, result.values), batch, self.columns)
        )
        return BatchOutcome(ok, self._rejected(batch, result))

    def _attach(self, batch: pa.RecordBatch, values: pa.Array) -> pa.RecordBatch:
        idx = batch.schema.get_field_index(self.output)
        field = pa.field(self.output, values.type)
        if idx >= 0:
            return batch.set_column(idx, field, values)
        return batch.append_column(field, values)

    def _rejected(self, batch: pa.RecordBatch, result: UdfResult) -> pa.RecordBatch:
        # One entry per failed range (their number is bounded by the bisection budget).
        idx = np.concatenate([np.arange(f.start, f.stop, dtype=np.int64) for f in result.failures])
        messages = pa.concat_arrays(
            [
                pa.repeat(
                    pa.scalar(f"wasm_map `{self.step_id}`: {f.error}", pa.string()),
                    f.stop - f.start,
                )
                for f in result.failures
            ]
        )
        self._first_rejects.log(self.step_id, str(result.failures[0].error))
        return dlq_batch_from_rows(
            batch,
            pa.array(idx, pa.int64()),
            reason=RejectReason.UDF,
            step_id=self.step_id,
            messages=messages,
            columns=self.columns,
        )


@operator
def wasm_map(
    step_id: str,
    up: KeyedStream[pa.RecordBatch],
    function: WasmFunction,
    *,
    args: Sequence[str],
    output: str,
    metadata_prefix: str = DEFAULT_PREFIX,
) -> WasmOut:
    """Run a WASM function over columns of each batch; its result becomes column ``output``.

    Source partitions are the unit of parallelism; each batch is its own work. The
    columns ``args`` cross into the module as Arrow buffers, ``chunk_rows`` rows per
    call (a fresh, fuel-metered, memory-capped instance per call); the result is read
    back as one Arrow column, appended as ``output`` (or replacing a column of that
    name). A chunk that fails (out of fuel, past its memory cap, a trap, a non-zero
    status) is bisected until the rows that fail are isolated (within
    ``max_bisect_calls`` extra calls per batch); those rows go to ``rejected`` with
    reason ``udf``, the others to ``ok``, in input order. The ``ok`` batch then stands
    for its whole input (its input span), so a sink downstream covers the rejected
    offsets too. The flow never stops for a function's failure.

    ```python
    import thalweg_bytewax.operators as twg
    from thalweg_bytewax.udf import WasmFunction

    c2f = WasmFunction("udf.wasm", "celsius_to_fahrenheit", args=["float64"], returns="float64")
    out = twg.wasm_map("to_f", readings, c2f, args=["celsius"], output="fahrenheit")
    ```

    Args:
        step_id: Unique step id.
        up: Keyed batches, key = source partition.
        function: The WASM function.
        args: The batch columns passed as the function's arguments, in order.
        output: The name of the result column.
        metadata_prefix: The prefix of the metadata columns (for the DLQ rows).

    Returns:
        ``WasmOut(ok, rejected)``.

    Raises:
        ConfigError: At build time, when ``args`` does not match the function's
            arguments in number or ``output`` is empty.
    """
    columns = metadata_columns(metadata_prefix, f"wasm_map `{step_id}`")
    names = tuple(args)
    if len(names) != len(function.args):
        msg = (
            f"wasm_map `{step_id}`: expected {len(function.args)} argument column(s) for "
            f"`{function.name}`; got {list(names)!r}"
        )
        raise ConfigError(msg)
    if not output:
        msg = f"wasm_map `{step_id}`: expected a name for the `output` column; got {output!r}"
        raise ConfigError(msg)
    mapper = _Mapper(step_id, function, names, output, columns)
    ok, rejected = map_outcomes(up, mapper.run)
    return WasmOut(ok=ok, rejected=rejected)


class _SqlRunner:
    """The per-batch work of :func:`wasm_sql`."""

    def __init__(self, step_id: str, node: SqlNode, columns: MetadataColumns) -> None:
        self.step_id = step_id
        self.node = node
        self.columns = columns
        self._first_rejects = FirstRejects(logger, "wasm_sql", "batch(es) a function failed on")

    def run(self, batch: pa.RecordBatch) -> BatchOutcome:
        try:
            out = self.node.run(batch)
        except WasmUdfError as exc:
            message, rejected = rejected_whole(
                batch, exc, operator="wasm_sql", step_id=self.step_id, columns=self.columns
            )
            self._first_rejects.log(self.step_id, message)
            return BatchOutcome(None, rejected)
        return BatchOutcome(out if out.num_rows else None, None)


@operator
def wasm_sql(
    step_id: str,
    up: KeyedStream[pa.RecordBatch],
    query: str,
    *,
    functions: Sequence[WasmFunction],
    name: str = "input",
    params: Mapping[str, object] | None = None,
    timeout: timedelta | None = timedelta(seconds=DEFAULT_SQL_NODE_TIMEOUT_SECONDS),
    memory_limit_bytes: int = DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
    metadata_prefix: str = DEFAULT_PREFIX,
) -> WasmOut:
    """``twg.sql`` with WASM scalar functions: one ``SELECT`` per batch that may call them.

    The query is checked and run as :func:`thalweg_bytewax.operators.sql` runs it
    (one ``SELECT`` over ``name``, lineage kept, bounded in time and memory), on a
    database of the step's own where each function is registered by its SQL name as
    a DuckDB Arrow-vectorised function: DuckDB hands over a vector of each argument
    (2,048 rows) and the module runs once over it. A function failing on a batch (out
    of fuel, past its memory cap, a trap, a non-zero status) sends the whole batch to
    ``rejected`` with reason ``udf`` (the query may filter, join or aggregate, so its
    failing rows are not the input's); any other failure of the query raises as in
    ``twg.sql``.

    ```python
    out = twg.wasm_sql(
        "enrich", readings, "SELECT *, c2f(celsius) AS fahrenheit FROM input",
        functions=[WasmFunction("udf.wasm", "celsius_to_fahrenheit", args=["float64"],
                                returns="float64", name="c2f")],
    )
    ```

    Args:
        step_id: Unique step id.
        up: Keyed batches, key = source partition.
        query: One ``SELECT`` over ``name``; it may call ``functions`` by their names.
        functions: The WASM functions the query may call.
        name: The relation name of the batch in ``query``.
        params: Values for ``$name`` parameters of ``query``.
        timeout: The bound on one run over one batch (``None``: unbounded).
        memory_limit_bytes: The memory limit of the step's database.
        metadata_prefix: The prefix of the metadata columns.

    Returns:
        ``WasmOut(ok, rejected)``.

    Raises:
        ConfigError: At build time, as ``twg.sql``, for no functions, or for a function
            name DuckDB refuses (one that clashes with a built-in).
    """
    columns = metadata_columns(metadata_prefix, f"wasm_sql `{step_id}`")
    if not functions:
        msg = f"wasm_sql `{step_id}`: expected at least one WasmFunction; got none (use twg.sql)"
        raise ConfigError(msg)
    node = sql_node(
        f"wasm_sql `{step_id}`",
        step_id,
        query,
        name=name,
        params=params,
        columns=columns,
        timeout=timeout,
        memory_limit_bytes=memory_limit_bytes,
        functions=functions,
    )
    runner = _SqlRunner(step_id, node, columns)
    ok, rejected = map_outcomes(up, runner.run)
    return WasmOut(ok=ok, rejected=rejected)
