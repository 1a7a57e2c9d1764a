"""SQL on DuckDB over Arrow batches: the sandboxed engine, transform nodes and SQL DAGs.

The package is layered; each module has one job:

* :mod:`.syntax`: the one shape user SQL is accepted in (one expression, one
  ``SELECT``) and the SQL this package writes around it;
* :mod:`.bounds`: the time and memory bounds of a query, and the errors past them;
* :mod:`.engine`: ``SqlSession``, an isolated, sandboxed in-memory database (contract
  rules run on one), and the process's cursor for this package's own queries;
* :mod:`.prepared`: a query prepared once and run once per batch;
* :mod:`.node`: the transform engine of ``twg.sql`` (its own ``SqlNode``), which keeps
  each output row's locator through :mod:`.lineage`;
* :mod:`.dag_nodes`, :mod:`.dag` and :mod:`.dag_runner`: a DAG of SQL nodes, its
  nodes, its checks at build and its run per batch.

The names below load their module on first access, so importing the package loads
neither DuckDB nor pydantic. ``SqlNode`` here is a node of a DAG
(``SqlDag([SqlNode(...)])``); the single-relation engine of ``twg.sql`` is
:class:`thalweg_bytewax.sql.node.SqlNode`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_package

if TYPE_CHECKING:
    from thalweg_bytewax.sql._functions import FUNCTION_NAMES
    from thalweg_bytewax.sql.bounds import (
        DEFAULT_MEMORY_LIMIT_BYTES,
        MIN_MEMORY_LIMIT_BYTES,
        SqlMemoryError,
        SqlTimeoutError,
        check_memory_limit,
        engine_errors,
        format_bytes,
    )
    from thalweg_bytewax.sql.dag import SqlDag, table_references
    from thalweg_bytewax.sql.dag_nodes import INPUT, SqlDagError, SqlNode
    from thalweg_bytewax.sql.dag_runner import DagRunner, SqlDagRunError
    from thalweg_bytewax.sql.engine import SqlSession, shared_cursor
    from thalweg_bytewax.sql.node import (
        DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
        DEFAULT_SQL_NODE_TIMEOUT_SECONDS,
        SqlNodeError,
        memory_limit_error,
        transform_session,
    )
    from thalweg_bytewax.sql.prepared import PreparedQuery
    from thalweg_bytewax.sql.syntax import (
        SqlError,
        check_expression,
        check_query,
        duckdb_type,
        first_line,
        predicate_sql,
        quote_ident,
        scalar_sql,
    )

_HOMES = {
    "FUNCTION_NAMES": "._functions",
    "DEFAULT_MEMORY_LIMIT_BYTES": ".bounds",
    "MIN_MEMORY_LIMIT_BYTES": ".bounds",
    "SqlMemoryError": ".bounds",
    "SqlTimeoutError": ".bounds",
    "check_memory_limit": ".bounds",
    "engine_errors": ".bounds",
    "format_bytes": ".bounds",
    "SqlDag": ".dag",
    "table_references": ".dag",
    "INPUT": ".dag_nodes",
    "SqlDagError": ".dag_nodes",
    "SqlNode": ".dag_nodes",
    "DagRunner": ".dag_runner",
    "SqlDagRunError": ".dag_runner",
    "SqlSession": ".engine",
    "shared_cursor": ".engine",
    "DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES": ".node",
    "DEFAULT_SQL_NODE_TIMEOUT_SECONDS": ".node",
    "SqlNodeError": ".node",
    "memory_limit_error": ".node",
    "transform_session": ".node",
    "PreparedQuery": ".prepared",
    "SqlError": ".syntax",
    "check_expression": ".syntax",
    "check_query": ".syntax",
    "duckdb_type": ".syntax",
    "first_line": ".syntax",
    "predicate_sql": ".syntax",
    "quote_ident": ".syntax",
    "scalar_sql": ".syntax",
}

__all__ = [
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES",
    "DEFAULT_SQL_NODE_TIMEOUT_SECONDS",
    "FUNCTION_NAMES",
    "INPUT",
    "MIN_MEMORY_LIMIT_BYTES",
    "DagRunner",
    "PreparedQuery",
    "SqlDag",
    "SqlDagError",
    "SqlDagRunError",
    "SqlError",
    "SqlMemoryError",
    "SqlNode",
    "SqlNodeError",
    "SqlSession",
    "SqlTimeoutError",
    "check_expression",
    "check_memory_limit",
    "check_query",
    "duckdb_type",
    "engine_errors",
    "first_line",
    "format_bytes",
    "memory_limit_error",
    "predicate_sql",
    "quote_ident",
    "scalar_sql",
    "shared_cursor",
    "table_references",
    "transform_session",
]

__getattr__, __dir__ = lazy_package(__name__, _HOMES, globals())
