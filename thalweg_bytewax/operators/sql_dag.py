"""``sql_dag``: a checked DAG of SQL nodes over keyed Arrow batches, sinks at any node.

The whole DAG runs per input batch inside one Bytewax step: each node runs once, in
topological order, on the process's sandboxed transform database (the engine of
``twg.sql``, so rows keep their lineage), and its rows are kept for its dependents (see
:mod:`thalweg_bytewax.sql.dag`). A node with several dependents is therefore computed
once per batch. The results then split into one keyed stream per node, so a sink
attaches to an interior node as easily as to a leaf. Streams keep the input's key (the
source partition, ``"topic:N"``), so the epoch sinks keep one owner per source partition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import operator
from bytewax.operators import KeyedStream
from bytewax.outputs import DynamicSink, FixedPartitionedSink

from thalweg_bytewax.config import UNSET, Unset
from thalweg_bytewax.operators._outcome import rejected_whole
from thalweg_bytewax.operators.sql import sql_timeout
from thalweg_bytewax.records import DEFAULT_PREFIX, MetadataColumns, metadata_columns
from thalweg_bytewax.sql.dag import SqlDag
from thalweg_bytewax.sql.dag_nodes import SqlDagError
from thalweg_bytewax.sql.dag_runner import DagPlan, DagRunner, empty_batch
from thalweg_bytewax.sql.node import (
    DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
)
from thalweg_bytewax.udf.function import WasmFunction, WasmUdfError

__all__ = ["SqlDagOut", "sql_dag"]

logger = logging.getLogger(__name__)

_NO_SINKS: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class SqlDagOut:
    """What :func:`sql_dag` returns: the per-batch results, and a stream per node on demand.

    Index it by node name (``out["big_orders"]``) for that node's keyed batches. The
    first access adds one ``filter_map`` step, ``<step_id>_<node>``, to the flow; later
    accesses return the same stream. A batch whose node result is empty is not emitted.

    Attributes:
        results: Per input batch, the rows of every node, keyed like the
            input: ``(key, {node: pa.RecordBatch})``.
        schemas: The output schema of every node, resolved at build.
        runner: The runner shared by the workers of this process; its ``runs`` count
            the queries per node and ``batches`` the input batches.
        stream_prefix: The prefix of the node streams' step ids (the step id).
        rejected: With WASM ``functions``: DLQ batches (reason ``udf``) of the input
            batches a function failed on, each rejected whole (every node's result is
            empty for it); ``None`` without functions.
    """

    results: KeyedStream[dict[str, pa.RecordBatch]]
    schemas: Mapping[str, pa.Schema]
    runner: DagRunner = field(repr=False)
    stream_prefix: str
    rejected: KeyedStream[pa.RecordBatch] | None = None
    _streams: dict[str, KeyedStream[pa.RecordBatch]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __getitem__(self, name: str) -> KeyedStream[pa.RecordBatch]:
        """The stream of node ``name``.

        Raises:
            SqlDagError: When the DAG has no such node.
        """
        if name not in self._streams:
            _check_output(self.runner.dag, name)
            self._streams[name] = op.filter_map(
                f"{self.stream_prefix}_{name}", self.results, _picker(name)
            )
        return self._streams[name]


def _check_output(dag: DagPlan, name: str) -> None:
    if name not in dag.nodes:
        msg = f"sql dag: expected one of the nodes {sorted(dag.nodes)!r}; got {name!r}"
        raise SqlDagError(msg)


def _picker(
    name: str,
) -> Callable[[tuple[str, dict[str, pa.RecordBatch]]], tuple[str, pa.RecordBatch] | None]:
    def pick(item: tuple[str, dict[str, pa.RecordBatch]]) -> tuple[str, pa.RecordBatch] | None:
        key, batches = item
        batch = batches[name]
        return (key, batch) if batch.num_rows else None

    return pick


def _check_sinks(dag: SqlDag, sinks: Mapping[str, object]) -> None:
    declared = dag.sinks
    for name in sinks:
        if name not in declared:
            msg = (
                f"sql dag: sink `{name}` is attached to no node; expected one of the sinks "
                f"the nodes name {sorted(declared)!r}; set `sink = {name!r}` on a node"
            )
            raise SqlDagError(msg)
    for name, node in declared.items():
        if name not in sinks:
            msg = (
                f"sql dag node `{node}`: names sink `{name}`, which `sinks` does not "
                f"provide; pass it as sinks={{{name!r}: ...}}"
            )
            raise SqlDagError(msg)


@operator
def sql_dag(
    step_id: str,
    up: KeyedStream[pa.RecordBatch],
    dag: SqlDag,
    *,
    schema: pa.Schema,
    sinks: Mapping[str, DynamicSink[Any] | FixedPartitionedSink[Any, Any]] = _NO_SINKS,
    timeout: timedelta | None | Unset = UNSET,
    memory_limit_bytes: int = DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
    metadata_prefix: str = DEFAULT_PREFIX,
    functions: Sequence[WasmFunction] = (),
    timeout_seconds: float | None | Unset = UNSET,
) -> SqlDagOut:
    """Run a SQL DAG per keyed batch; one stream per node, sinks at any node.

    Every query is checked against ``schema`` when the flow is built
    (:meth:`SqlDag.bind`): an unknown relation, a cycle, a missing column, a duplicate
    node name or a sink on an unknown node fails here, naming the node. A query that
    fails on a batch at run time raises :class:`~thalweg_bytewax.sql.dag_runner.SqlDagRunError`
    naming the node.

    Sub-steps (recovery keys): ``run``; per sink in ``sinks``, ``node_<node>`` and
    ``sink_<sink name>``; per node stream taken from the result, ``<step_id>_<node>``
    beside this step.

    Example::

        dag = SqlDag.from_toml("dag.toml")
        out = sql_dag("transform", decoded.ok, dag, schema=ORDERS_SCHEMA)
        op.output("big", out["big_orders"], ParquetSink(lake / "big"))

    Args:
        step_id: Unique id of this step.
        up: Keyed batches (key: the source partition), all of ``schema``.
        dag: The DAG; node queries read the batch as ``input``.
        schema: The schema of the input batches, for the build-time checks.
        sinks: Sinks by the names the nodes give in ``sink``; each node with a sink is
            written to it. Empty: attach sinks yourself from the returned streams.
        timeout: The bound on each node's query per batch (default 60 s; ``None``:
            unbounded).
        memory_limit_bytes: The memory limit of the process's transform database the
            nodes run on (DuckDB ``memory_limit``, default 1 GiB, no spill to disk); a
            query past it fails the batch naming the node, the limit and how to raise it.
        metadata_prefix: The prefix of the metadata columns (for the locator check).
        functions: WASM scalar functions the queries may call by their SQL names
            (:class:`~thalweg_bytewax.udf.function.WasmFunction`, the ``wasm`` extra).
            A batch a function fails on (out of fuel, past its memory cap, a trap) goes
            whole to ``rejected`` with reason ``udf``, and every node's result is empty
            for it: the flow goes on. Sub-steps then ``run``, ``results`` and
            ``rejected``.
        timeout_seconds: Deprecated: ``timeout`` in seconds.

    Returns:
        The per-batch results (index by node name for a node's stream), the schemas
        and the runner.

    Raises:
        SqlDagError: When the DAG does not bind to ``schema`` or ``sinks`` does not
            match the sinks the nodes name.
    """
    columns = metadata_columns(metadata_prefix, f"sql_dag `{step_id}`")
    bound = sql_timeout(f"sql_dag `{step_id}`", timeout, timeout_seconds)
    schemas = dag.bind(
        schema,
        columns=columns,
        timeout_seconds=bound,
        memory_limit_bytes=memory_limit_bytes,
        functions=functions,
    )
    if sinks:
        _check_sinks(dag, sinks)
    runner = DagRunner(
        dag,
        columns=columns,
        timeout_seconds=bound,
        memory_limit_bytes=memory_limit_bytes,
        functions=functions,
    )
    rejected: KeyedStream[pa.RecordBatch] | None = None
    if functions:
        guarded = _Guarded(step_id, runner, schemas, columns)
        runs = op.map_value("run", up, guarded.run)
        results = op.map_value("results", runs, lambda r: r[0])
        rejected = op.filter_map_value("rejected", runs, lambda r: r[1])
    else:

        def run(item: tuple[str, pa.RecordBatch]) -> tuple[str, dict[str, pa.RecordBatch]]:
            key, batch = item
            return key, runner.run(batch)

        results = op.map("run", up, run)
    for sink_name, node in dag.sinks.items():
        if sink_name in sinks:
            batches = op.filter_map(f"node_{node}", results, _picker(node))
            op.output(f"sink_{sink_name}", batches, sinks[sink_name])
    logger.info("sql_dag %s: nodes %s", step_id, dag.order)
    return SqlDagOut(
        results, MappingProxyType(schemas), runner, step_id.rsplit(".", 1)[-1], rejected
    )


class _Guarded:
    """Runs the DAG per batch; a batch a WASM function fails on becomes DLQ rows."""

    def __init__(
        self,
        step_id: str,
        runner: DagRunner,
        schemas: Mapping[str, pa.Schema],
        columns: MetadataColumns,
    ) -> None:
        self.step_id = step_id
        self.runner = runner
        self.columns = columns
        self.empty = {name: empty_batch(schema) for name, schema in schemas.items()}

    def run(self, batch: pa.RecordBatch) -> tuple[dict[str, pa.RecordBatch], pa.RecordBatch | None]:
        try:
            return self.runner.run(batch), None
        except WasmUdfError as exc:
            message, rejected = rejected_whole(
                batch, exc, operator="sql_dag", step_id=self.step_id, columns=self.columns
            )
            logger.warning("%s", message)
            return dict(self.empty), rejected
