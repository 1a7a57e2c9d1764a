"""What a parsed ``SELECT`` reads, with each ``WITH`` name bound only where it is in scope.

Transform SQL (``twg.sql`` and every SQL DAG node) may read only the relations it is
given, its own CTEs and the row generators. Both checks walk DuckDB's own parse tree
(``json_serialize_sql``) through :func:`relation_reads`, which yields every relation a
query reads together with the CTE names visible *at that point*:

* a ``WITH`` list's names are visible in its query node (its ``FROM``, its expressions,
  the subqueries below them) and in the bodies of the CTEs that follow in the same list,
  never outside that node: a CTE named ``duckdb_settings`` inside a subquery does not
  turn the outer query's ``duckdb_settings`` (DuckDB's catalog view) into a CTE read;
* a CTE body does not see its own name unless it is recursive (DuckDB reads the catalog
  there, or refuses the circular reference);
* ``SHOW``, ``DESCRIBE`` and ``SUMMARIZE`` (in the tree, ``SHOW_REF``), wherever they
  appear, are reads of the catalog: the callers refuse them.

The walk uses an explicit stack: DuckDB parses expressions nested deeper than Python's
recursion limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Read", "relation_reads"]

_READS = frozenset({"BASE_TABLE", "TABLE_FUNCTION", "SHOW_REF"})


@dataclass(frozen=True)
class Read:
    """One relation a query reads.

    Attributes:
        kind: ``BASE_TABLE`` (a name), ``TABLE_FUNCTION`` or ``SHOW_REF`` (``SHOW``,
            ``DESCRIBE``, ``SUMMARIZE``).
        name: The lower-cased name: the table's (qualified as written, e.g.
            ``main.orders``), the function's, or what a ``SHOW`` lists.
        qualified: Whether a table name carries a schema or catalog.
        cte: Whether the name is a CTE in scope where it is read (a table only).
    """

    kind: str
    name: str
    qualified: bool = False
    cte: bool = False


def _read(node: dict[str, Any], visible: frozenset[str]) -> Read:
    kind = str(node["type"])
    if kind == "TABLE_FUNCTION":
        fn = str((node.get("function") or {}).get("function_name", "")).lower()
        return Read(kind, fn)
    table = str(node.get("table_name") or "")
    if kind == "SHOW_REF":
        return Read(kind, table.strip('"').lower() or "query")
    parts = [node.get("catalog_name"), node.get("schema_name"), table]
    qualified = bool(parts[0] or parts[1])
    name = ".".join(str(p) for p in parts if p).lower()
    return Read(kind, name, qualified=qualified, cte=not qualified and name in visible)


def relation_reads(tree: dict[str, Any]) -> Iterator[Read]:
    """Every relation the parsed query ``tree`` reads, CTE names bound by scope.

    Args:
        tree: DuckDB's ``json_serialize_sql`` output for the query, parsed.

    Yields:
        One :class:`Read` per table, table function or ``SHOW`` in the tree.
    """
    stack: list[tuple[Any, frozenset[str]]] = [(tree, frozenset())]
    while stack:
        item, visible = stack.pop()
        if isinstance(item, list):
            stack.extend((v, visible) for v in item)
            continue
        if not isinstance(item, dict):
            continue
        if item.get("type") in _READS:
            yield _read(item, visible)
        cte_map = item.get("cte_map")
        if isinstance(cte_map, dict):
            scope = visible
            for entry in cte_map.get("map") or ():
                key = str(entry.get("key", "")).lower()
                body = entry.get("value") or {}
                recursive = (body.get("query_node") or {}).get("type") == "RECURSIVE_CTE_NODE"
                stack.append((body, scope | {key} if recursive else scope))
                scope = scope | {key}
            stack.extend((v, scope) for k, v in item.items() if k != "cte_map")
        else:
            stack.extend((v, visible) for v in item.values())
