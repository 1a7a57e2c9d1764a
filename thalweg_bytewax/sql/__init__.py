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

from thalweg_bytewax._lazy import lazy_reexports

if TYPE_CHECKING:
    from ._functions import FUNCTION_NAMES as FUNCTION_NAMES
    from .bounds import DEFAULT_MEMORY_LIMIT_BYTES as DEFAULT_MEMORY_LIMIT_BYTES
    from .bounds import MIN_MEMORY_LIMIT_BYTES as MIN_MEMORY_LIMIT_BYTES
    from .bounds import SqlMemoryError as SqlMemoryError
    from .bounds import SqlTimeoutError as SqlTimeoutError
    from .bounds import check_memory_limit as check_memory_limit
    from .bounds import engine_errors as engine_errors
    from .bounds import format_bytes as format_bytes
    from .dag import SqlDag as SqlDag
    from .dag import table_references as table_references
    from .dag_nodes import INPUT as INPUT
    from .dag_nodes import SqlDagError as SqlDagError
    from .dag_nodes import SqlNode as SqlNode
    from .dag_runner import DagRunner as DagRunner
    from .dag_runner import SqlDagRunError as SqlDagRunError
    from .engine import SqlSession as SqlSession
    from .engine import shared_cursor as shared_cursor
    from .node import DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES as DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES
    from .node import DEFAULT_SQL_NODE_TIMEOUT_SECONDS as DEFAULT_SQL_NODE_TIMEOUT_SECONDS
    from .node import SqlNodeError as SqlNodeError
    from .node import memory_limit_error as memory_limit_error
    from .node import transform_session as transform_session
    from .prepared import PreparedQuery as PreparedQuery
    from .syntax import SqlError as SqlError
    from .syntax import check_expression as check_expression
    from .syntax import check_query as check_query
    from .syntax import duckdb_type as duckdb_type
    from .syntax import first_line as first_line
    from .syntax import predicate_sql as predicate_sql
    from .syntax import quote_ident as quote_ident
    from .syntax import scalar_sql as scalar_sql

__getattr__, __dir__ = lazy_reexports(globals())
