r"""SQL DAGs: named ``SELECT`` nodes over the input batch and each other, checked at build.

A DAG is a set of :class:`SqlNode`\\ s. Each node is one ``SELECT`` that reads the input
batch (the relation ``input``) and the nodes it lists in ``depends_on``, and nothing
else. A node may name a ``sink``: its rows go there, whether it is a leaf or an interior
node. Everything that can be known before a flow runs is checked when the DAG is built,
and each refusal names the node:

* names are unique snake_case identifiers, none of them ``input``;
* a query is exactly one ``SELECT`` (:func:`~thalweg_bytewax.sqlengine.check_query`);
* every relation a query reads is ``input`` or a node it lists in ``depends_on``, and
  every node it lists is one it reads (table references come from DuckDB's own parse
  tree, ``json_serialize_sql``);
* the dependencies form no cycle;
* one sink has one node (two writers to one sink would both own the same source
  partitions).

:meth:`SqlDag.bind` then runs each node once over an *empty* batch of the input schema,
which is what DuckDB's ``DESCRIBE`` does: a column a query names that its inputs lack,
a type mismatch or an unknown function is refused naming the node, and the output schema
of every node is known before the first record arrives.

Execution (:class:`DagRunner`) runs the nodes per batch in topological order. Every
node is materialised: its rows are computed once per batch and registered for each of
its dependents, so a node with several dependents runs once per batch, never once per
dependent. A node reading one relation runs on :class:`thalweg_bytewax.sqlnode.SqlNode`
(the engine of ``twg.sql``), so its rows keep the locator of the records they came from
(through filters, ``unnest`` and aggregates, ADR-0004) and a sink at any node skips
replays by offset. A node reading several relations (a join of ``input`` and a node, or
of two nodes) runs as written and must select the locator columns itself to feed a sink.
"""

from __future__ import annotations

import graphlib
import logging
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pydantic
from pydantic import BaseModel, ConfigDict

from thalweg_bytewax._sqlreads import relation_reads
from thalweg_bytewax.errors import ConfigError, ThalwegError
from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS, MetadataColumns
from thalweg_bytewax.sqlengine import (
    SqlError,
    SqlMemoryError,
    check_query,
    engine_errors,
    first_line,
    shared_cursor,
)
from thalweg_bytewax.sqlnode import (
    DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
    DEFAULT_SQL_NODE_TIMEOUT_SECONDS,
    SqlNodeError,
    memory_limit_error,
    transform_session,
)
from thalweg_bytewax.sqlnode import SqlNode as _NodeEngine

__all__ = [
    "INPUT",
    "DagRunner",
    "SqlDag",
    "SqlDagError",
    "SqlDagRunError",
    "SqlNode",
    "table_references",
]

logger = logging.getLogger(__name__)

INPUT = "input"
"""The relation name under which every node reads the input batch."""

# Node names become table names in user SQL and sub-step ids of the flow (which are
# recovery keys), so they are plain snake_case identifiers.
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


# The table functions that only generate rows (the `twg.sql` engine allows the same).
_ROW_GENERATORS = frozenset({"unnest", "range", "generate_series"})

_Engine = _NodeEngine | tuple[str, ...]
"""How a node runs: on the single-relation engine, or as written over these relations."""


class SqlDagError(ConfigError):
    """A SQL DAG is refused before the flow runs; the message names the node."""


class SqlDagRunError(ThalwegError):
    """A node's query failed on a batch (a conversion error, the time bound); names the node."""


class SqlNode(BaseModel):
    """One node of a :class:`SqlDag`.

    Attributes:
        name: A snake_case identifier; other nodes read the node's rows under it.
        query: Exactly one ``SELECT`` over ``input`` and the nodes in ``depends_on``.
        depends_on: The nodes the query reads (``input`` is always readable).
        sink: The name of the sink that receives this node's rows, if any.
        materialise: Always true: every node's rows are computed once per batch and
            shared by its dependents. Inlining a node into its dependent would lose the
            lineage of its rows, so ``false`` is refused.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    query: str
    depends_on: tuple[str, ...] = ()
    sink: str | None = None
    materialise: bool = True


def _fail(node: str | None, problem: str) -> SqlDagError:
    where = f"sql dag node `{node}`" if node is not None else "sql dag"
    return SqlDagError(f"{where}: {problem}")


def _coerce(index: int, node: SqlNode | Mapping[str, Any]) -> SqlNode:
    if isinstance(node, SqlNode):
        return node
    if not isinstance(node, Mapping):
        msg = (
            f"sql dag: expected node {index} to be a SqlNode or a table; got {type(node).__name__}"
        )
        raise SqlDagError(msg)
    label = node.get("name", index)
    try:
        return SqlNode.model_validate(dict(node))
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "node"
        problem = f"field `{field}`: {err['msg'][:1].lower()}{err['msg'][1:]}"
        # Raised outside pydantic's context: its text echoes the input values.
        failure = _fail(str(label), f"{problem}; valid fields are {sorted(SqlNode.model_fields)}")
    raise failure


def table_references(query: str) -> set[str]:
    """The relations ``query`` reads, from DuckDB's parse tree (CTEs in scope excluded).

    Names are lower-cased (DuckDB resolves identifiers case-insensitively); a qualified
    reference keeps its qualifier (``main.orders``), so it never matches a node.

    Raises:
        SqlError: When ``query`` is not exactly one parsable ``SELECT``.
    """
    check_query(query)
    # fetchall, not fetchone: a result left unfinished blocks the shared cursor's next user.
    text = shared_cursor().execute("SELECT json_serialize_sql($1)", [query]).fetchall()[0][0]
    tree = orjson.loads(text)
    if tree.get("error"):
        msg = f"expected one SELECT statement; got {query!r}: {tree.get('error_message')}"
        raise SqlError(msg)
    refs: set[str] = set()
    for read in relation_reads(tree):
        if read.kind == "TABLE_FUNCTION" and read.name not in _ROW_GENERATORS:
            msg = (
                f"expected reads of `input` and nodes only; got the table function "
                f"`{read.name}` (files, databases and settings are out of reach) in {query!r}"
            )
            raise SqlError(msg)
        if read.kind == "SHOW_REF":
            msg = (
                f"expected reads of `input` and nodes only; got a SHOW, DESCRIBE or "
                f"SUMMARIZE of `{read.name}` (the catalog and settings are out of reach) "
                f"in {query!r}"
            )
            raise SqlError(msg)
        if read.kind == "BASE_TABLE" and not read.cte:
            refs.add(read.name)
    return refs


class SqlDag:
    """A checked DAG of SQL nodes over one input relation.

    Build it from Python (``SqlDag([SqlNode(...), ...])`` or plain mappings) or from
    TOML (:meth:`from_toml`). Construction checks the structure (see the module
    docstring); :meth:`bind` checks every query against the input schema.

    Args:
        nodes: The nodes, in any order.

    Raises:
        SqlDagError: Naming the node that is refused and why.
    """

    def __init__(self, nodes: Iterable[SqlNode | Mapping[str, Any]]) -> None:
        parsed = tuple(_coerce(i, n) for i, n in enumerate(nodes))
        if not parsed:
            raise _fail(None, "expected at least one node; got none")
        self.nodes: dict[str, SqlNode] = {}
        for node in parsed:
            self._check_name(node)
            self.nodes[node.name] = node
        self._check_sinks()
        for node in parsed:
            self._check_depends_on(node)
        self.order: tuple[str, ...] = self._topological_order()
        self._reads: dict[str, tuple[str, ...]] = {}
        for name in self.order:
            self._check_references(self.nodes[name])
        dependents: dict[str, list[str]] = {name: [] for name in self.order}
        for name in self.order:
            for dep in self.nodes[name].depends_on:
                dependents[dep].append(name)
        self.dependents: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in dependents.items()}
        logger.debug("sql dag: %d nodes in order %s", len(self.order), self.order)

    @classmethod
    def from_toml(cls, source: str | os.PathLike[str]) -> SqlDag:
        """A DAG from TOML: ``[[nodes]]`` tables with the :class:`SqlNode` fields.

        Args:
            source: A path (a ``PathLike``, or a one-line ``str`` ending in ``.toml``)
                or the TOML text itself.

        Raises:
            SqlDagError: When the file cannot be read, the text is not TOML, it has
                other top-level keys than ``nodes``, or the DAG is refused.
        """
        is_path = isinstance(source, os.PathLike) or (
            "\n" not in source and source.strip().endswith(".toml")
        )
        origin = f"`{os.fspath(source)}`" if is_path else "text"
        try:
            text = Path(source).read_text(encoding="utf-8") if is_path else str(source)
        except OSError as exc:
            msg = f"sql dag {origin}: expected a readable TOML file; got {exc.strerror}"
            raise SqlDagError(msg) from exc
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            msg = f"sql dag {origin}: expected TOML; got {exc}"
            raise SqlDagError(msg) from exc
        extra = sorted(set(data) - {"nodes"})
        if extra or not isinstance(data.get("nodes"), list):
            msg = (
                f"sql dag {origin}: expected `[[nodes]]` tables only; got keys {sorted(data)!r}; "
                "write each node as a `[[nodes]]` table"
            )
            raise SqlDagError(msg)
        return cls(data["nodes"])

    def __repr__(self) -> str:
        return f"SqlDag(nodes={list(self.order)!r})"

    @property
    def sinks(self) -> dict[str, str]:
        """The node of each sink, by sink name."""
        return {n.sink: n.name for n in self.nodes.values() if n.sink is not None}

    def reads(self, name: str) -> tuple[str, ...]:
        """The relations node ``name`` reads: ``input`` (when it does) and its dependencies."""
        return self._reads[name]

    # -- structural checks ------------------------------------------------------------

    def _check_name(self, node: SqlNode) -> None:
        if not _NAME.match(node.name):
            problem = (
                f"expected a snake_case name (lower-case letters, digits, underscores, "
                f"starting with a letter or underscore); got {node.name!r}; rename the node"
            )
            raise _fail(node.name, problem)
        if node.name == INPUT:
            raise _fail(node.name, "`input` is the input batch; give the node another name")
        if node.name in self.nodes:
            raise _fail(node.name, "expected unique node names; got the name twice; rename one")
        if not node.materialise:
            problem = (
                "expected `materialise = true`; got false: every node's rows are computed "
                "once per batch and shared, and inlining would lose their lineage; drop it"
            )
            raise _fail(node.name, problem)

    def _check_sinks(self) -> None:
        owners: dict[str, str] = {}
        for node in self.nodes.values():
            if node.sink is None:
                continue
            if not _NAME.match(node.sink):
                problem = f"expected a snake_case sink name; got {node.sink!r}; rename the sink"
                raise _fail(node.name, problem)
            if node.sink in owners:
                problem = (
                    f"sink `{node.sink}` is already fed by node `{owners[node.sink]}`; "
                    "one sink takes one node (two would both write the same source "
                    "partitions); give each node its own sink"
                )
                raise _fail(node.name, problem)
            owners[node.sink] = node.name

    def _check_depends_on(self, node: SqlNode) -> None:
        if len(set(node.depends_on)) != len(node.depends_on):
            problem = f"expected each dependency once; got depends_on={list(node.depends_on)!r}"
            raise _fail(node.name, problem)
        for dep in node.depends_on:
            if dep == INPUT:
                problem = "lists `input` in depends_on; every node reads `input`, drop it"
                raise _fail(node.name, problem)
            if dep not in self.nodes:
                problem = (
                    f"depends on unknown relation `{dep}`; expected one of the nodes "
                    f"{sorted(self.nodes)!r}"
                )
                raise _fail(node.name, problem)

    def _topological_order(self) -> tuple[str, ...]:
        sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
        for node in self.nodes.values():
            sorter.add(node.name, *node.depends_on)
        try:
            return tuple(sorter.static_order())
        except graphlib.CycleError as exc:
            cycle: list[str] = exc.args[1]
            path = " -> ".join(f"`{n}`" for n in reversed(cycle))
            problem = f"expected no cycle; got {path}; break it by removing one dependency"
            raise _fail(cycle[0], problem) from None

    def _check_references(self, node: SqlNode) -> None:
        try:
            refs = table_references(node.query)
        except SqlError as exc:
            raise _fail(node.name, str(exc)) from exc
        allowed = {INPUT, *node.depends_on}
        for ref in sorted(refs - allowed):
            if ref in self.nodes:
                problem = f"reads node `{ref}` without listing it; add it to depends_on"
            else:
                problem = (
                    f"reads unknown relation `{ref}`; expected `input` or one of "
                    f"depends_on {list(node.depends_on)!r}"
                )
            raise _fail(node.name, problem)
        for dep in node.depends_on:
            if dep not in refs:
                problem = f"lists `{dep}` in depends_on but its query never reads it; drop it"
                raise _fail(node.name, problem)
        self._reads[node.name] = ((INPUT,) if INPUT in refs else ()) + node.depends_on

    # -- against a schema -------------------------------------------------------------

    def bind(
        self,
        schema: pa.Schema,
        *,
        columns: MetadataColumns = DEFAULT_COLUMNS,
        timeout_seconds: float | None = DEFAULT_SQL_NODE_TIMEOUT_SECONDS,
        memory_limit_bytes: int = DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
    ) -> dict[str, pa.Schema]:
        """Check every query against ``schema`` and return each node's output schema.

        Each node runs once over an empty batch of ``schema`` and the empty results of
        its dependencies: DuckDB binds it exactly as it will per batch (what ``DESCRIBE``
        does), so a missing column, a type mismatch or an unknown function is refused
        here, naming the node. A node with a sink must keep the locator columns (topic,
        partition, offset) when the input has them: the epoch sinks cover and skip
        replays by them.

        Args:
            schema: The schema of the input batches.
            columns: The metadata column names (their prefix).
            timeout_seconds: The bound on each check query.
            memory_limit_bytes: The memory limit of the transform database the nodes
                run on (see :class:`DagRunner`).

        Returns:
            The output schema of every node, by name, in execution order.

        Raises:
            SqlDagError: Naming the node whose query does not bind, or that feeds a
                sink without the locator columns.
        """
        runner = DagRunner(
            self,
            columns=columns,
            timeout_seconds=timeout_seconds,
            memory_limit_bytes=memory_limit_bytes,
        )
        out: dict[str, pa.RecordBatch] = {INPUT: _empty(schema)}
        refused: tuple[type[Exception], ...] = (*engine_errors(), SqlNodeError, ConfigError)
        for name in self.order:
            try:
                out[name] = runner.run_node(name, out)
            except refused as exc:
                inputs = "; ".join(
                    f"`{k}`: {', '.join(out[k].schema.names)}" for k in self.reads(name)
                )
                problem = (
                    f"expected the query to bind against its inputs ({inputs}); got "
                    f"{first_line(exc)}; fix the query or its depends_on"
                )
                raise _fail(name, problem) from exc
        locator = [columns.source_topic, columns.source_partition, columns.source_offset]
        if all(name in schema.names for name in locator):
            for sink, name in self.sinks.items():
                lost = [c for c in locator if c not in out[name].schema.names]
                if lost:
                    problem = (
                        f"feeds sink `{sink}` but its rows lose {lost!r}; the sink covers "
                        "and skips replays by each row's locator: select those columns"
                    )
                    raise _fail(name, problem)
        return {name: out[name].schema for name in self.order}


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


class DagRunner:
    """Runs a :class:`SqlDag` per batch, each node once, and counts.

    Each node runs once per batch, in topological order, and its rows are kept for its
    dependents. A node reading one relation runs on
    :class:`thalweg_bytewax.sqlnode.SqlNode`, which keeps its rows' lineage; a node
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

    Raises:
        SqlDagError: When a node's query is refused by the engine (it reads files,
            settings or a table function), naming the node, or the memory limit is
            under 16 MiB.
    """

    def __init__(
        self,
        dag: SqlDag,
        *,
        columns: MetadataColumns = DEFAULT_COLUMNS,
        timeout_seconds: float | None = DEFAULT_SQL_NODE_TIMEOUT_SECONDS,
        memory_limit_bytes: int = DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
    ) -> None:
        self.dag = dag
        self.timeout_seconds = timeout_seconds
        self.memory_limit_bytes = memory_limit_bytes
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
                )
            except ConfigError as exc:
                raise _fail(name, str(exc)) from exc
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
        """
        engine = self._engines[name]
        if isinstance(engine, _NodeEngine):
            out = engine.run(results[engine.name])
        else:
            tables = {k: results[k] for k in engine}
            query = self.dag.nodes[name].query
            session = transform_session(self.memory_limit_bytes)
            try:
                table = session.query(tables, query, timeout_seconds=self.timeout_seconds)
            except SqlMemoryError as exc:
                raise memory_limit_error(name, self.memory_limit_bytes, exc) from exc
            out = _one_batch(table)
        self.runs[name] += 1
        return out

    def stats(self) -> dict[str, Any]:
        """Plain counters: ``batches`` seen and query ``runs`` per node."""
        return {"batches": self.batches, "runs": dict(self.runs)}


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    if table.num_rows == 0:
        return _empty(table.schema)
    return table.combine_chunks().to_batches()[0]
