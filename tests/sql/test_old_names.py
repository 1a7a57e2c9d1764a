"""The SQL modules' names before they moved into ``thalweg_bytewax.sql`` still resolve.

For one release a user's ``from thalweg_bytewax.sqlengine import SqlSession`` warns and
works, and state pickled under an old module name (a recovery store written before the
move) unpickles to the class at its new home.
"""

from __future__ import annotations

import importlib
import pickle
import sys
import warnings
from collections.abc import Iterator
from types import ModuleType

import pytest

from thalweg_bytewax.sql.dag import SqlDag
from thalweg_bytewax.sql.dag_nodes import SqlNode
from thalweg_bytewax.sql.engine import SqlSession

# Each old module's `__all__` as the release before the move had it.
OLD_PUBLIC = {
    "thalweg_bytewax.sqlengine": (
        "FUNCTION_NAMES DEFAULT_MEMORY_LIMIT_BYTES MIN_MEMORY_LIMIT_BYTES PreparedQuery "
        "SqlError SqlMemoryError SqlSession SqlTimeoutError check_expression "
        "check_memory_limit check_query duckdb_type engine_errors first_line format_bytes "
        "predicate_sql quote_ident scalar_sql shared_cursor"
    ),
    "thalweg_bytewax.sqldag": (
        "INPUT DagRunner SqlDag SqlDagError SqlDagRunError SqlNode table_references"
    ),
    "thalweg_bytewax.sqlnode": (
        "DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES DEFAULT_SQL_NODE_TIMEOUT_SECONDS SqlNode "
        "SqlNodeError memory_limit_error transform_session"
    ),
    "thalweg_bytewax.lineage": (
        "attach_aggregate_lineage attach_row_lineage contributor_offsets_column "
        "derived_ordinal_column derived_ordinals drop_hidden locator_columns"
    ),
    "thalweg_bytewax._sqltransform": "ROW ROWS LineageMode TransformPlan plan_transform",
    "thalweg_bytewax._sqlwatchdog": "Watchdog",
    "thalweg_bytewax._sqlfunctions": "FUNCTION_NAMES install_functions",
    "thalweg_bytewax._sqlreads": "Read relation_reads",
    "thalweg_bytewax.sql.transform_session": (
        "DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES DEFAULT_SQL_NODE_TIMEOUT_SECONDS "
        "functions_session memory_limit_error transform_session"
    ),
}


def _old(name: str) -> ModuleType:
    sys.modules.pop(name, None)
    with pytest.warns(DeprecationWarning, match=f"`{name}` moved to"):
        return importlib.import_module(name)


@pytest.fixture
def sql_package_attributes() -> Iterator[None]:
    """Undo what importing an old name sets on the package (the submodule as attribute)."""
    package = importlib.import_module("thalweg_bytewax.sql")
    before = dict(vars(package))
    yield
    for name in set(vars(package)) - set(before):
        delattr(package, name)
    for name, value in before.items():
        setattr(package, name, value)


@pytest.mark.parametrize(("old", "names"), sorted(OLD_PUBLIC.items()))
@pytest.mark.usefixtures("sql_package_attributes")
def test_every_public_name_of_an_old_module_resolves(old: str, names: str) -> None:
    module = _old(old)
    missing = [n for n in names.split() if not hasattr(module, n)]
    assert not missing, f"{old} lost {missing}"


def test_the_dag_node_keeps_its_name_under_the_old_dag_module() -> None:
    # `sqldag.SqlNode` was the DAG's node model, not the transform engine of `sqlnode`.
    assert _old("thalweg_bytewax.sqldag").SqlNode is SqlNode
    assert _old("thalweg_bytewax.sqlengine").SqlSession is SqlSession


def _written_before_the_move(obj: object, new: str, old: str) -> bytes:
    # Protocol 2 names classes with GLOBAL opcodes ("module\nname\n").
    data = pickle.dumps(obj, protocol=2)
    assert new.encode() + b"\n" in data
    return data.replace(new.encode() + b"\n", old.encode() + b"\n")


def test_a_session_pickled_under_the_old_module_unpickles() -> None:
    session = SqlSession(5.0, threads=1, memory_limit_bytes=32 * 1024 * 1024)
    data = _written_before_the_move(
        session, "thalweg_bytewax.sql.engine", "thalweg_bytewax.sqlengine"
    )
    sys.modules.pop("thalweg_bytewax.sqlengine", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        restored = pickle.loads(data)
    assert isinstance(restored, SqlSession)
    assert (restored.timeout_seconds, restored.threads, restored.memory_limit_bytes) == (
        5.0,
        1,
        32 * 1024 * 1024,
    )


def test_a_dag_pickled_under_the_old_module_unpickles() -> None:
    dag = SqlDag([SqlNode(name="big", query="SELECT * FROM input WHERE amount > 10")])
    data = _written_before_the_move(dag, "thalweg_bytewax.sql.dag", "thalweg_bytewax.sqldag")
    # its nodes too: the node model was `sqldag.SqlNode`
    data = data.replace(b"thalweg_bytewax.sql.dag_nodes\n", b"thalweg_bytewax.sqldag\n")
    sys.modules.pop("thalweg_bytewax.sqldag", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        restored = pickle.loads(data)
    assert isinstance(restored, SqlDag)
    assert restored.order == ("big",)
    assert restored.nodes["big"] == dag.nodes["big"]
