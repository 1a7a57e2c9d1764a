"""The nodes of a SQL DAG: their model, and how they are read from Python and TOML.

A node is a :class:`SqlNode`; a DAG (:class:`~thalweg_bytewax.sql.dag.SqlDag`) takes
them as models or plain mappings (:func:`coerce_node`), or as the ``[[nodes]]`` tables of
a TOML file (:func:`nodes_from_toml`). Every refusal is a :class:`SqlDagError` naming
the node.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict

from thalweg_bytewax.errors import ConfigError

__all__ = ["INPUT", "SqlDagError", "SqlNode", "coerce_node", "dag_error", "nodes_from_toml"]

INPUT = "input"
"""The relation name under which every node reads the input batch."""


class SqlDagError(ConfigError):
    """A SQL DAG is refused before the flow runs; the message names the node."""


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


def dag_error(node: str | None, problem: str) -> SqlDagError:
    """A :class:`SqlDagError` saying ``problem`` of ``node`` (of the whole DAG: ``None``)."""
    where = f"sql dag node `{node}`" if node is not None else "sql dag"
    return SqlDagError(f"{where}: {problem}")


def coerce_node(index: int, node: SqlNode | Mapping[str, Any]) -> SqlNode:
    """``node`` (number ``index``) as a :class:`SqlNode`: validated when a mapping.

    Raises:
        SqlDagError: Naming the node and the field that is refused.
    """
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
        failure = dag_error(
            str(label), f"{problem}; valid fields are {sorted(SqlNode.model_fields)}"
        )
    raise failure


def nodes_from_toml(source: str | os.PathLike[str]) -> list[Any]:
    """The ``[[nodes]]`` tables of a TOML file or text, unchecked (``SqlDag`` checks them).

    Args:
        source: A path (a ``PathLike``, or a one-line ``str`` ending in ``.toml``)
            or the TOML text itself.

    Raises:
        SqlDagError: When the file cannot be read, the text is not TOML, or it has
            other top-level keys than ``nodes``.
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
    nodes: list[Any] = data["nodes"]
    return nodes
