"""Running a SQL DAG per batch: each node once, in topological order.

:class:`DagRunner` runs the nodes of a :class:`~thalweg_bytewax.sql.dag.SqlDag` (or any
:class:`DagPlan`) per batch. Every node is materialised: its rows are computed once per
batch and kept for each of its dependents. A node reading one relation runs on
:class:`thalweg_bytewax.sql.node.SqlNode` (the engine of ``twg.sql``), so its rows keep
the locator of the records they came from; a node reading several relations runs as
written. A query failing on a batch raises :class:`SqlDagRunError` naming the node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from thalweg_bytewax.errors import ConfigError, ThalwegError
from thalweg_bytewax.records import DEFAULT_COLUMNS, MetadataColumns
from thalweg_bytewax.sql.bounds import SqlMemoryError, engine_errors
from thalweg_bytewax.sql.dag_nodes import INPUT, SqlNode, dag_error
from thalweg_bytewax.sql.node import (
    DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
    DEFAULT_SQL_NODE_TIMEOUT_SECONDS,
    SqlNodeError,
    memory_limit_error,
    transform_session,
)
from thalweg_bytewax.sql.node import SqlNode as _NodeEngine
from thalweg_bytewax.sql.sessions import functions_session
from thalweg_bytewax.sql.syntax import first_line
from thalweg_bytewax.udf.sql_functions import take_failure

if TYPE_CHECKING:
    from thalweg_bytewax.udf.function import WasmFunction

__all__ = ["DagPlan", "DagRunner", "SqlDagRunError", "empty_batch"]

_Engine = _NodeEngine | tuple[str, ...]
"""How a node runs: on the single-relation engine, or as written over these relations."""


class SqlDagRunError(ThalwegError):
    """A node's query failed on a batch (a conversion error, the time bound); names the node."""


class DagPlan(Protocol):
    """What a runner needs of a DAG: a :class:`~thalweg_bytewax.sql.dag.SqlDag` is one."""

    @property
    def order(self) -> tuple[str, ...]:
        """The node names in execution (topological) order."""

    @property
    def nodes(self) -> Mapping[str, SqlNode]:
        """The nodes by name."""

    def reads(self, name: str) -> tuple[str, ...]:
        """The relations node ``name`` reads."""


class DagRunner:
    """Runs a :class:`SqlDag` per batch, each node once, and counts.

    Each node runs once per batch, in topological order, and its rows are kept for its
    dependents. A node reading one relation runs on
    :class:`thalweg_bytewax.sql.node.SqlNode`, which keeps its rows' lineage; a node
    reading several runs as written on the same process-wide transform session.
    ``runs`` counts the queries per node and ``batches`` the batches seen: a node with
    several dependents shows one run per batch.

    Args:
        dag: The DAG.
        columns: The metadata column names.
        timeout_seconds: The bound on each node's query per batch.
        memory_limit_bytes: The memory limit of the process's transform database the
            nodes run on (DuckDB's ``memory_limit``, no spill to disk); a node's query
            past it fails the batch with :class:`SqlDagRunError` naming the node, the
            limit and how to raise it.
        functions: WASM scalar functions every node's query may call by their SQL
            names; the nodes then run on databases of their own (of the same memory
            limit), and a function failing on a batch raises
            :class:`~thalweg_bytewax.udf.function.WasmUdfError` naming the node.

    Raises:
        SqlDagError: When a node's query is refused by the engine (it reads files,
            settings or a table function), naming the node, or the memory limit is
            under 16 MiB.
    """

    def __init__(
        self,
        dag: DagPlan,
        *,
        columns: MetadataColumns = DEFAULT_COLUMNS,
        timeout_seconds: float | None = DEFAULT_SQL_NODE_TIMEOUT_SECONDS,
        memory_limit_bytes: int = DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
        functions: Sequence[WasmFunction] = (),
    ) -> None:
        self.dag = dag
        self.timeout_seconds = timeout_seconds
        self.memory_limit_bytes = memory_limit_bytes
        self.functions = tuple(functions)
        # The nodes reading several relations share one database with the functions.
        self._session = functions_session(memory_limit_bytes, self.functions)
        self._engines: dict[str, _Engine] = {}
        for name in dag.order:
            reads = dag.reads(name)
            if len(reads) != 1:
                self._engines[name] = reads
                continue
            try:
                self._engines[name] = _NodeEngine(
                    name,
                    dag.nodes[name].query,
                    name=reads[0],
                    columns=columns,
                    timeout_seconds=timeout_seconds,
                    memory_limit_bytes=memory_limit_bytes,
                    functions=self.functions,
                )
            except ConfigError as exc:
                raise dag_error(name, str(exc)) from exc
        self.runs: dict[str, int] = dict.fromkeys(dag.order, 0)
        self.batches = 0

    def run(self, batch: pa.RecordBatch) -> dict[str, pa.RecordBatch]:
        """Every node's rows for ``batch``, by node name, in execution order.

        Raises:
            SqlDagRunError: Naming the node whose query failed on this batch.
        """
        results: dict[str, pa.RecordBatch] = {INPUT: batch}
        self.batches += 1
        failed: tuple[type[Exception], ...] = (*engine_errors(), SqlNodeError)
        for name in self._engines:
            try:
                results[name] = self.run_node(name, results)
            except failed as exc:
                msg = f"sql dag node `{name}`: the query failed on a batch: {first_line(exc)}"
                raise SqlDagRunError(msg) from exc
        del results[INPUT]
        return results

    def run_node(self, name: str, results: Mapping[str, pa.RecordBatch]) -> pa.RecordBatch:
        """Run node ``name`` once over ``results`` (``input`` and its dependencies' rows).

        Raises:
            SqlNodeError: From the engine, when the query fails.
            SqlTimeoutError: When the query passed the time bound.
            SqlMemoryError: When the query needed more than the memory limit.
            WasmUdfError: When a WASM function failed on the batch, naming the node.
        """
        engine = self._engines[name]
        if isinstance(engine, _NodeEngine):
            out = engine.run(results[engine.name])
        else:
            tables = {k: results[k] for k in engine}
            query = self.dag.nodes[name].query
            session = self._session or transform_session(self.memory_limit_bytes)
            if self.functions:
                take_failure()  # a failure left by an earlier query is not this one's
            try:
                table = session.query(tables, query, timeout_seconds=self.timeout_seconds)
            except SqlMemoryError as exc:
                raise memory_limit_error(name, self.memory_limit_bytes, exc) from exc
            except engine_errors() as exc:
                failure = take_failure() if self.functions else None
                if failure is None:
                    raise
                msg = f"sql `{name}`: {failure}"
                raise type(failure)(msg, failure.kind) from exc
            out = _one_batch(table)
        self.runs[name] += 1
        return out

    def stats(self) -> dict[str, Any]:
        """Plain counters: ``batches`` seen and query ``runs`` per node."""
        return {"batches": self.batches, "runs": dict(self.runs)}


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    if table.num_rows == 0:
        return empty_batch(table.schema)
    return table.combine_chunks().to_batches()[0]


def empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    """A batch of ``schema`` with no rows."""
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)
