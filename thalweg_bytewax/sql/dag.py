r"""SQL DAGs: named ``SELECT`` nodes over the input batch and each other, checked at build.

A DAG is a set of :class:`SqlNode`\\ s. Each node is one ``SELECT`` that reads the input
batch (the relation ``input``) and the nodes it lists in ``depends_on``, and nothing
else. A node may name a ``sink``: its rows go there, whether it is a leaf or an interior
node. Everything that can be known before a flow runs is checked when the DAG is built,
and each refusal names the node:

* names are unique snake_case identifiers, none of them ``input``;
* a query is exactly one ``SELECT`` (:func:`~thalweg_bytewax.sql.syntax.check_query`);
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

Execution (:class:`~thalweg_bytewax.sql.dag_runner.DagRunner`) runs the nodes per batch
in topological order. Every node is materialised: its rows are computed once per batch
and registered for each of its dependents, so a node with several dependents runs once
per batch, never once per dependent. A node reading one relation runs on
:class:`thalweg_bytewax.sql.node.SqlNode` (the engine of ``twg.sql``), so its rows keep
the locator of the records they came from (through filters, ``unnest`` and aggregates,
ADR-0004) and a sink at any node skips replays by offset. A node reading several
relations (a join of ``input`` and a node, or of two nodes) runs as written and must
select the locator columns itself to feed a sink.
"""

from __future__ import annotations

import graphlib
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records import DEFAULT_COLUMNS, MetadataColumns
from thalweg_bytewax.sql._reads import ROW_GENERATORS, relation_reads
from thalweg_bytewax.sql.bounds import engine_errors
from thalweg_bytewax.sql.dag_nodes import (
    INPUT,
    SqlNode,
    coerce_node,
    dag_error,
    nodes_from_toml,
)
from thalweg_bytewax.sql.dag_runner import DagRunner, empty_batch
from thalweg_bytewax.sql.engine import shared_cursor
from thalweg_bytewax.sql.node import (
    DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
    DEFAULT_SQL_NODE_TIMEOUT_SECONDS,
    SqlNodeError,
)
from thalweg_bytewax.sql.syntax import SqlError, check_query, first_line

if TYPE_CHECKING:
    from thalweg_bytewax.udf.function import WasmFunction

__all__ = ["SqlDag", "table_references"]

logger = logging.getLogger(__name__)

# Node names become table names in user SQL and sub-step ids of the flow (which are
# recovery keys), so they are plain snake_case identifiers.
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


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
        if read.kind == "TABLE_FUNCTION" and read.name not in ROW_GENERATORS:
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
        parsed = tuple(coerce_node(i, n) for i, n in enumerate(nodes))
        if not parsed:
            raise dag_error(None, "expected at least one node; got none")
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
        return cls(nodes_from_toml(source))

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
            raise dag_error(node.name, problem)
        if node.name == INPUT:
            raise dag_error(node.name, "`input` is the input batch; give the node another name")
        if node.name in self.nodes:
            raise dag_error(node.name, "expected unique node names; got the name twice; rename one")
        if not node.materialise:
            problem = (
                "expected `materialise = true`; got false: every node's rows are computed "
                "once per batch and shared, and inlining would lose their lineage; drop it"
            )
            raise dag_error(node.name, problem)

    def _check_sinks(self) -> None:
        owners: dict[str, str] = {}
        for node in self.nodes.values():
            if node.sink is None:
                continue
            if not _NAME.match(node.sink):
                problem = f"expected a snake_case sink name; got {node.sink!r}; rename the sink"
                raise dag_error(node.name, problem)
            if node.sink in owners:
                problem = (
                    f"sink `{node.sink}` is already fed by node `{owners[node.sink]}`; "
                    "one sink takes one node (two would both write the same source "
                    "partitions); give each node its own sink"
                )
                raise dag_error(node.name, problem)
            owners[node.sink] = node.name

    def _check_depends_on(self, node: SqlNode) -> None:
        if len(set(node.depends_on)) != len(node.depends_on):
            problem = f"expected each dependency once; got depends_on={list(node.depends_on)!r}"
            raise dag_error(node.name, problem)
        for dep in node.depends_on:
            if dep == INPUT:
                problem = "lists `input` in depends_on; every node reads `input`, drop it"
                raise dag_error(node.name, problem)
            if dep not in self.nodes:
                problem = (
                    f"depends on unknown relation `{dep}`; expected one of the nodes "
                    f"{sorted(self.nodes)!r}"
                )
                raise dag_error(node.name, problem)

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
            raise dag_error(cycle[0], problem) from None

    def _check_references(self, node: SqlNode) -> None:
        try:
            refs = table_references(node.query)
        except SqlError as exc:
            raise dag_error(node.name, str(exc)) from exc
        allowed = {INPUT, *node.depends_on}
        for ref in sorted(refs - allowed):
            if ref in self.nodes:
                problem = f"reads node `{ref}` without listing it; add it to depends_on"
            else:
                problem = (
                    f"reads unknown relation `{ref}`; expected `input` or one of "
                    f"depends_on {list(node.depends_on)!r}"
                )
            raise dag_error(node.name, problem)
        for dep in node.depends_on:
            if dep not in refs:
                problem = f"lists `{dep}` in depends_on but its query never reads it; drop it"
                raise dag_error(node.name, problem)
        self._reads[node.name] = ((INPUT,) if INPUT in refs else ()) + node.depends_on

    # -- against a schema -------------------------------------------------------------

    def bind(
        self,
        schema: pa.Schema,
        *,
        columns: MetadataColumns = DEFAULT_COLUMNS,
        timeout_seconds: float | None = DEFAULT_SQL_NODE_TIMEOUT_SECONDS,
        memory_limit_bytes: int = DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
        functions: Sequence[WasmFunction] = (),
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
            functions: WASM scalar functions the queries may call (see
                :class:`DagRunner`).

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
            functions=functions,
        )
        out: dict[str, pa.RecordBatch] = {INPUT: empty_batch(schema)}
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
                raise dag_error(name, problem) from exc
        locator = [columns.source_topic, columns.source_partition, columns.source_offset]
        if all(name in schema.names for name in locator):
            for sink, name in self.sinks.items():
                lost = [c for c in locator if c not in out[name].schema.names]
                if lost:
                    problem = (
                        f"feeds sink `{sink}` but its rows lose {lost!r}; the sink covers "
                        "and skips replays by each row's locator: select those columns"
                    )
                    raise dag_error(name, problem)
        return {name: out[name].schema for name in self.order}
