"""``sql``: transform SQL on DuckDB over keyed Arrow batch streams, lineage kept.

Users write one ``SELECT`` over the batch (filter, project, enrich, unnest, aggregate
within the batch); DuckDB runs it per batch in-process, over the batch read
zero-copy as a named relation. The engine half is
:class:`thalweg_bytewax.sql.node.SqlNode`; see ``docs/sql.md`` for the functions shipped
with the engine, the sandbox and the lineage rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import operator
from bytewax.operators import KeyedStream

from thalweg_bytewax.config import UNSET, Unset, bound_keyword
from thalweg_bytewax.records import DEFAULT_COLUMNS, MetadataColumns
from thalweg_bytewax.sql.node import (
    DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
    DEFAULT_SQL_NODE_TIMEOUT_SECONDS,
    SqlNode,
)

if TYPE_CHECKING:
    from thalweg_bytewax.udf.function import WasmFunction

__all__ = ["sql", "sql_node", "sql_timeout"]


def sql_timeout(
    where: str,
    timeout: timedelta | None | Unset,
    timeout_seconds: float | None | Unset,
) -> float | None:
    """A SQL step's bound on one batch in seconds (``None``: unbounded; default 60 s).

    The deprecation warning for ``timeout_seconds`` points at the caller of the
    function that calls this one.

    Args:
        where: The step as messages name it (``sql `lines```).
        timeout: The operator's ``timeout``; :data:`UNSET` when not passed.
        timeout_seconds: Its deprecated spelling in seconds; :data:`UNSET` when not passed.

    Raises:
        ConfigError: For both ``timeout`` and ``timeout_seconds``, or a ``timeout`` that
            is no positive ``timedelta`` nor ``None``.
    """
    return bound_keyword(
        where,
        "timeout",
        timeout,
        "timeout_seconds",
        timeout_seconds,
        default=timedelta(seconds=DEFAULT_SQL_NODE_TIMEOUT_SECONDS),
        stacklevel=4,
    )


def sql_node(
    where: str,
    step_id: str,
    query: str,
    *,
    name: str,
    params: Mapping[str, object] | None,
    columns: MetadataColumns,
    timeout: timedelta | None | Unset,
    memory_limit_bytes: int,
    timeout_seconds: float | None | Unset = UNSET,
    functions: Sequence[WasmFunction] = (),
) -> SqlNode:
    """The node a SQL operator runs, its bound from ``timeout`` (default 60 s).

    Args:
        where: The step as messages name it (``sql `lines```).
        step_id: The step's id.
        query: One ``SELECT`` over ``name``.
        name: The relation name of the batch in ``query``.
        params: Values for ``$name`` parameters of ``query``.
        columns: The metadata column names.
        timeout: The bound on one run over one batch (``None``: unbounded).
        memory_limit_bytes: The memory limit of the database the query runs on.
        timeout_seconds: The deprecated spelling of ``timeout``, where the operator
            still takes it.
        functions: The Wasm functions the query may call.

    Raises:
        ConfigError: As :class:`~thalweg_bytewax.sql.node.SqlNode`, or for both
            ``timeout`` and ``timeout_seconds``.
    """
    return SqlNode(
        step_id,
        query,
        name=name,
        params=params,
        columns=columns,
        timeout_seconds=sql_timeout(where, timeout, timeout_seconds),
        memory_limit_bytes=memory_limit_bytes,
        functions=functions,
    )


@operator
def sql(
    step_id: str,
    up: KeyedStream[pa.RecordBatch],
    query: str,
    *,
    name: str = "input",
    params: Mapping[str, object] | None = None,
    columns: MetadataColumns = DEFAULT_COLUMNS,
    timeout: timedelta | None | Unset = UNSET,
    memory_limit_bytes: int = DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
    timeout_seconds: float | None | Unset = UNSET,
) -> KeyedStream[pa.RecordBatch]:
    """Run one ``SELECT`` over each batch of a keyed stream; the output keyed like the input.

    Source partitions are the unit of parallelism: each batch (one poll of one source
    partition) is queried on its own, on the process's one sandboxed DuckDB database, so
    an aggregate covers one batch (fold across batches with a window). The query is
    checked and rewritten once, at build, and prepared once per worker thread; a batch
    then costs one DuckDB execution (~1 ms fixed, see ``docs/sql.md`` for batch sizes).
    Every output row keeps the locator and record id of the input row it came from:
    rows an ``unnest`` derives share their parent's, numbered by
    ``_twg_derived_ordinal``; aggregate rows carry their last contributor's locator, a
    null record id and ``_twg_contributor_offsets``. A sink downstream is then
    exactly-once per source offset like one fed by the source. Batches with no output
    rows are not emitted.

    The query is checked when the flow is built: exactly one ``SELECT`` that reads only
    ``name``, its own CTEs and ``unnest`` / ``range`` / ``generate_series``. Files,
    ``ATTACH``, ``INSTALL`` / ``LOAD``, ``SET``, ``PRAGMA``, ``COPY`` and HTTP reads are
    refused naming ``step_id``; at run time external access is off and the configuration
    locked, a second wall. Each run is bounded in time (``timeout``) and in
    memory: the process's transform database has a DuckDB ``memory_limit`` (default
    1 GiB, shared by the nodes with the same limit) and never spills to disk, so a query
    that needs more fails the batch with ``SqlMemoryError`` naming ``step_id``, the
    limit and how to raise it.

    ```python
    import thalweg_bytewax.operators as twg

    lines = twg.sql(
        "lines",
        orders,
        "SELECT order_id, unnest(items) AS item FROM input WHERE amount > $min",
        params={"min": 10},
    )
    ```

    Args:
        step_id: Unique id of the step (named in every refusal).
        up: Keyed batches, key = source partition (``"orders:3"``).
        query: One ``SELECT`` over the relation ``name``.
        name: The relation name of the batch in ``query``.
        params: Values for ``$name`` parameters of ``query``.
        columns: The metadata column names.
        timeout: The bound on one run over one batch (default 60 s; ``None``:
            unbounded).
        memory_limit_bytes: The memory limit of the transform database the query runs
            on (at least 16 MiB).
        timeout_seconds: Deprecated: ``timeout`` in seconds.

    Returns:
        The query's output per batch, keyed by the input's key.

    Raises:
        ConfigError: At build time, for a query that is not one ``SELECT`` over ``name``,
            whose parameters do not match ``params``, or a memory limit under 16 MiB.
    """
    node = sql_node(
        f"sql `{step_id}`",
        step_id,
        query,
        name=name,
        params=params,
        columns=columns,
        timeout=timeout,
        timeout_seconds=timeout_seconds,
        memory_limit_bytes=memory_limit_bytes,
    )

    def run(batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        if batch.num_rows == 0:
            return []
        out = node.run(batch)
        return [out] if out.num_rows else []

    return op.flat_map_value("run", up, run)
