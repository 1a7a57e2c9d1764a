"""One transform SQL node: a checked ``SELECT`` run per Arrow batch, lineage kept.

:class:`SqlNode` is the engine-side half of the ``sql`` operator (and of each node of a
SQL DAG): built once, when the flow is built, it checks the query (exactly one
``SELECT`` reading only its batch, see ``sql._transform``) and plans how lineage is kept;
:meth:`SqlNode.run` then runs it over one batch on the process's transform database (one
sandboxed in-memory DuckDB per process, shared by every SQL node, separate from any
contract's), bounded in time, and re-attaches the locator of each output row's origin
(:mod:`thalweg_bytewax.sql.lineage`).

Nothing that does not depend on the batch is redone per batch: the query is parsed,
checked and rewritten once, at build; it is prepared once per thread
(:meth:`~thalweg_bytewax.sql.engine.SqlSession.prepare`: the batch relation registered
once, zero-copy, and re-pointed per run); the hidden row numbers are a slice of one
cached array. A run is one DuckDB execution plus a ``take`` per locator column.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from thalweg_bytewax._deps import require
from thalweg_bytewax.errors import ConfigError, ThalwegError
from thalweg_bytewax.records import DEFAULT_COLUMNS, MetadataColumns
from thalweg_bytewax.sql._transform import ROW, ROWS, LineageMode, TransformPlan, plan_transform
from thalweg_bytewax.sql.bounds import (
    SqlMemoryError,
    SqlTimeoutError,
    check_memory_limit,
)
from thalweg_bytewax.sql.engine import SqlSession
from thalweg_bytewax.sql.lineage import attach_aggregate_lineage, attach_row_lineage, drop_hidden
from thalweg_bytewax.sql.prepared import PreparedQuery
from thalweg_bytewax.sql.sessions import (
    DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
    DEFAULT_SQL_NODE_TIMEOUT_SECONDS,
    functions_session,
    memory_limit_error,
    transform_session,
)
from thalweg_bytewax.sql.syntax import SqlError, first_line
from thalweg_bytewax.udf.sql_functions import take_failure

if TYPE_CHECKING:
    from thalweg_bytewax.udf.function import WasmFunction

__all__ = [
    "DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES",
    "DEFAULT_SQL_NODE_TIMEOUT_SECONDS",
    "SqlNode",
    "SqlNodeError",
    "memory_limit_error",
    "transform_session",
]

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class SqlNodeError(ThalwegError):
    """A SQL node failed on a batch (DuckDB refused or failed the query at run time)."""


_ROWS_CACHE = 1 << 16


def _row_numbers(n: int) -> pa.Array:
    return pa.array(np.arange(max(n, _ROWS_CACHE), dtype=np.int64))


class SqlNode:
    """A transform query over one keyed batch stream, run per batch, lineage kept.

    The query sees the batch as the relation ``name``; its output keeps the locator
    (``_twg_source_topic``, ``_partition``, ``_offset``) and ``_twg_record_id`` of the
    input row each output row came from (rows an ``unnest`` derives share their parent's,
    numbered by ``_twg_derived_ordinal``; aggregate rows carry their last contributor's
    and ``_twg_contributor_offsets``). Everything is checked here, at build time.

    Args:
        step_id: The node's name in messages (the operator's step id).
        query: Exactly one ``SELECT`` reading only ``name`` (its own CTEs and
            ``unnest`` / ``range`` / ``generate_series`` too).
        name: The relation name of the batch in the query.
        params: Values for the query's ``$name`` parameters, one per name it uses.
        columns: The metadata column names.
        timeout_seconds: The bound on one run (``None``: unbounded).
        memory_limit_bytes: The memory limit of the transform database the node runs
            on, shared with the process's other nodes of the same limit (DuckDB's
            ``memory_limit``; no spill to disk). A run past it raises
            :class:`~thalweg_bytewax.sql.bounds.SqlMemoryError` naming the node.
        functions: WASM scalar functions the query may call by their SQL names
            (:class:`~thalweg_bytewax.udf.function.WasmFunction`). A node with functions
            runs on a database of its own (of the same memory limit), so its function
            names are its own; a function failing on a batch raises
            :class:`~thalweg_bytewax.udf.function.WasmUdfError` naming the node.

    Raises:
        ConfigError: When the query is not one ``SELECT``, reads anything else (files,
            other databases, settings, table functions), or its parameters do not
            match ``params``, or ``memory_limit_bytes`` is under 16 MiB; the message
            names the node.
    """

    def __init__(
        self,
        step_id: str,
        query: str,
        *,
        name: str = "input",
        params: Mapping[str, object] | None = None,
        columns: MetadataColumns = DEFAULT_COLUMNS,
        timeout_seconds: float | None = DEFAULT_SQL_NODE_TIMEOUT_SECONDS,
        memory_limit_bytes: int = DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
        functions: Sequence[WasmFunction] = (),
    ) -> None:
        self.step_id = step_id
        if not _NAME.match(name) or name.startswith("__twg"):
            msg = (
                f"sql `{step_id}`: expected `name` to be a plain identifier (letters, "
                f"digits, underscores; not starting with `__twg`); got {name!r}"
            )
            raise ConfigError(msg)
        if timeout_seconds is not None and not timeout_seconds > 0:
            msg = (
                f"sql `{step_id}`: expected a positive `timeout_seconds` or None; "
                f"got {timeout_seconds!r}"
            )
            raise ConfigError(msg)
        check_memory_limit(memory_limit_bytes, where=f"sql `{step_id}`")
        try:
            self.plan: TransformPlan = plan_transform(query, name=name)
        except SqlError as exc:
            msg = f"sql `{step_id}`: {exc}; write one SELECT over `{name}`"
            raise SqlError(msg) from exc
        self.name = name
        self.params = dict(params or {})
        self.columns = columns
        self.timeout_seconds = timeout_seconds
        self.memory_limit_bytes = memory_limit_bytes
        self.functions = tuple(functions)
        self._own_session = functions_session(memory_limit_bytes, self.functions)
        self._check_params()
        if self._own_session is not None:
            self._check_functions(self._own_session)
        self._prepared: PreparedQuery | None = None
        self._rows = _row_numbers(0)  # 0, 1, 2 ...: sliced per batch, grown once

    def __getstate__(self) -> dict[str, object]:
        # The prepared query and the row numbers are rebuilt on use, in the process's
        # own transform database.
        state = dict(self.__dict__)
        state["_prepared"] = None
        state["_rows"] = pa.array([], pa.int64())
        return state

    def _check_params(self) -> None:
        wanted = set(self.plan.params)
        given = set(self.params)
        if wanted != given:
            msg = (
                f"sql `{self.step_id}`: expected `params` for exactly the query's "
                f"parameters {sorted(wanted)!r}; got {sorted(given)!r}"
            )
            raise ConfigError(msg)

    def _check_functions(self, session: SqlSession) -> None:
        """Open the node's database now, so a function DuckDB refuses fails the build."""
        duckdb = require("duckdb", extra="sql")
        try:
            session.cursor()
        except duckdb.Error as exc:
            names = ", ".join(f"`{f.name}`" for f in self.functions)
            msg = (
                f"sql `{self.step_id}`: expected DuckDB to accept the functions {names}; "
                f"got {first_line(exc)}; rename a function that clashes with a built-in"
            )
            raise ConfigError(msg) from exc

    @property
    def mode(self) -> LineageMode:
        """How this node keeps lineage (decided at build, revised once on first run)."""
        return self.plan.mode

    def run(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Run the query over one batch; the output with its lineage columns.

        Raises:
            SqlNodeError: When DuckDB fails the query on this batch (a type error, the
                sandbox refusing a file or network read), naming the node.
            WasmUdfError: When a WASM function of the node failed on this batch (out
                of fuel, past its memory cap, a trap), naming the node.
            SqlTimeoutError: When the run passed the node's time bound.
            SqlMemoryError: When the run needed more than the node's memory limit,
                naming the node, the limit and how to raise it.
            ConfigError: When a query run as written drops the locator columns.
        """
        if batch.num_rows > len(self._rows):
            self._rows = _row_numbers(batch.num_rows)
        rows = self._rows.slice(0, batch.num_rows)
        idx = batch.schema.get_field_index(ROW)
        registered = (
            batch.set_column(idx, ROW, rows) if idx >= 0 else batch.append_column(ROW, rows)
        )
        table = self._query(registered)
        if self.plan.mode is LineageMode.ROW:
            out = attach_row_lineage(
                table, batch, row=ROW, columns=self.columns, ordinal=self.plan.multiplies
            )
        elif self.plan.mode is LineageMode.AGGREGATE:
            out = attach_aggregate_lineage(table, batch, row=ROW, rows=ROWS, columns=self.columns)
        else:
            out = self._check_as_written(table, batch)
        return _one_batch(out)

    def _query(self, registered: pa.RecordBatch) -> pa.Table:
        duckdb = require("duckdb", extra="sql")
        if self.functions:
            take_failure()  # a failure left by an earlier query is not this one's
        if self._prepared is None or self._prepared.sql != self.plan.sql:
            session = self._own_session or transform_session(self.memory_limit_bytes)
            self._prepared = session.prepare(
                self.name, self.plan.sql, timeout_seconds=self.timeout_seconds, params=self.params
            )
        try:
            return self._prepared.run(registered)
        except duckdb.BinderException as exc:
            if self.plan.mode is LineageMode.AS_WRITTEN or ROW not in str(exc):
                raise self._error(exc) from exc
            # The row number does not reach the top SELECT (a CTE or subquery projects
            # it away, a self-join makes it ambiguous): run the query as written, and
            # require its output to select the locator itself.
            logger.info(
                "sql `%s`: the row number cannot reach the output; the query runs as "
                "written and must select the locator columns",
                self.step_id,
            )
            self.plan = replace(self.plan, sql=self.plan.query, mode=LineageMode.AS_WRITTEN)
            return self._query(registered)
        except SqlTimeoutError as exc:
            msg = f"sql `{self.step_id}`: {exc}; raise `timeout_seconds` or simplify the query"
            raise SqlTimeoutError(msg) from exc
        except SqlMemoryError as exc:
            raise memory_limit_error(self.step_id, self.memory_limit_bytes, exc) from exc
        except duckdb.Error as exc:
            failure = take_failure() if self.functions else None
            if failure is not None:
                msg = f"sql `{self.step_id}`: {failure}"
                raise type(failure)(msg, failure.kind) from exc
            raise self._error(exc) from exc

    def _error(self, exc: BaseException) -> SqlNodeError:
        msg = (
            f"sql `{self.step_id}`: expected the query to run over the batch "
            f"`{self.name}`; got {type(exc).__name__}: {first_line(exc)}"
        )
        return SqlNodeError(msg)

    def _check_as_written(self, table: pa.Table, batch: pa.RecordBatch) -> pa.Table:
        cols = self.columns
        needed = [cols.source_topic, cols.source_partition, cols.source_offset]
        if all(c in batch.schema.names for c in needed):
            missing = [c for c in needed if c not in table.column_names]
            if missing:
                msg = (
                    f"sql `{self.step_id}`: expected the output to keep the locator "
                    f"columns of its records; got none of {missing!r} in its output. A set "
                    f"operation, DISTINCT or a CTE that drops `{ROW}` runs as written: select "
                    f"`{cols.source_topic}`, `{cols.source_partition}`, "
                    f"`{cols.source_offset}` (and `{cols.record_id}`), or carry `{ROW}` "
                    f"through to the top SELECT"
                )
                raise ConfigError(msg)
        return drop_hidden(table, ROW)


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    # DuckDB names the session's zone `Etc/UTC`; the rest of thalweg (and the table
    # sinks' zone checks) write `UTC`. Same instant, metadata-only cast.
    schema = table.schema
    if any(pa.types.is_timestamp(t) and t.tz == "Etc/UTC" for t in schema.types):
        fields = [
            f.with_type(pa.timestamp(f.type.unit, tz="UTC"))
            if pa.types.is_timestamp(f.type) and f.type.tz == "Etc/UTC"
            else f
            for f in schema
        ]
        table = table.cast(pa.schema(fields, metadata=schema.metadata))
    if table.num_rows == 0:
        return pa.RecordBatch.from_arrays(
            [pa.array([], f.type) for f in table.schema], schema=table.schema
        )
    batches = table.to_batches()
    # One chunk per column (DuckDB's usual answer for a batch) is one batch, uncopied.
    return batches[0] if len(batches) == 1 else table.combine_chunks().to_batches()[0]
