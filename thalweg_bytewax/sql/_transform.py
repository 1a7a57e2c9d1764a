"""The ``transform`` query shape: one ``SELECT`` over one named batch, checked and planned.

A transform query is checked in two walls. At build time (here) it must be exactly one
``SELECT`` (:func:`~thalweg_bytewax.sql.syntax.check_query`), and its parse tree (DuckDB's
own, through ``json_serialize_sql``) may read only the batch relation, its own CTEs and
the row generators ``unnest``, ``range`` and ``generate_series``: ``read_csv``,
``read_parquet``, ``'file.csv'``, ``query_table``, ``duckdb_settings()`` or another
database's table are refused before any data flows. At run time the session has external
access off and its configuration locked, so whatever the first wall missed cannot reach
a file or the network either.

The plan also decides how lineage is kept (ADR-0004). The batch is registered with a
hidden row number ``__twg_row``; the query's top ``SELECT`` gets one more output column:

* a row query (no ``GROUP BY``, aggregate or ``DISTINCT``) gets ``__twg_row`` itself, so
  each output row (also each row an ``unnest`` derives) names the input row it came from;
* an aggregate query gets ``max(__twg_row)`` and ``list(__twg_row)``: the last contributor
  and all of them.

Set operations and ``DISTINCT`` are run as written: their output must carry the locator
columns itself.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from thalweg_bytewax._deps import require
from thalweg_bytewax.sql._reads import relation_reads
from thalweg_bytewax.sql.syntax import SqlError, check_query, first_line, quote_ident

__all__ = ["ROW", "ROWS", "LineageMode", "TransformPlan", "plan_transform"]

ROW = "__twg_row"
"""The hidden row-number column of the registered batch (and of row-query output)."""
ROWS = "__twg_rows"
"""The output column of an aggregate query listing its contributing row numbers."""

_ROW_GENERATORS = frozenset({"unnest", "range", "generate_series"})
_MULTIPLIERS = frozenset({"unnest", "range", "generate_series"})


class LineageMode(StrEnum):
    """How a transform keeps the locator of the records its rows came from."""

    ROW = "row"
    """Each output row carries the row number of the one input row it came from."""
    AGGREGATE = "aggregate"
    """Each output row carries the row numbers of all its contributors."""
    AS_WRITTEN = "as_written"
    """The query runs unchanged; its output must select the locator columns."""


@dataclass(frozen=True)
class TransformPlan:
    """A checked transform query and the query that runs for it.

    Attributes:
        query: The user's query, as written.
        sql: The query that runs (``query`` with the lineage column added).
        mode: How lineage is kept.
        multiplies: Whether rows may multiply (an ``unnest`` or row generator), so
            derived rows need an ordinal next to their parent's offset.
        params: The names of the query's ``$name`` parameters.
    """

    query: str
    sql: str
    mode: LineageMode
    multiplies: bool
    params: frozenset[str] = frozenset()


_lock = threading.Lock()
_cache: dict[str, Any] = {}


def _connection() -> Any:
    # A private connection for parsing and (de)serialising only; never runs user data.
    with _lock:
        con = _cache.get("con")
        if con is None:
            con = require("duckdb", extra="sql").connect()
            con.execute("SET enable_external_access=false")
            _cache["con"] = con
            rows = con.execute(
                "SELECT DISTINCT function_name FROM duckdb_functions() "
                "WHERE function_type = 'aggregate'"
            ).fetchall()
            _cache["aggregates"] = frozenset(r[0].lower() for r in rows)
        return con


def _serialize(query: str) -> dict[str, Any]:
    con = _connection()
    with _lock:
        raw = con.execute("SELECT json_serialize_sql(CAST(? AS VARCHAR))", [query]).fetchone()
    tree: dict[str, Any] = json.loads(raw[0])
    if tree.get("error"):
        msg = f"expected one SELECT statement; got {query!r}: {tree.get('error_message')}"
        raise SqlError(msg)
    return tree


def _deserialize(tree: dict[str, Any]) -> str:
    con = _connection()
    with _lock:
        row = con.execute(
            "SELECT json_deserialize_sql(CAST(? AS JSON))", [json.dumps(tree)]
        ).fetchone()
    text: str = row[0]
    return text


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _check_reads(tree: dict[str, Any], query: str, name: str) -> None:
    """Refuse every relation but the batch, the CTEs in scope and the row generators."""
    for read in relation_reads(tree):
        if read.kind == "TABLE_FUNCTION" and read.name not in _ROW_GENERATORS:
            msg = (
                f"expected the query to read only the batch `{name}`; got the table "
                f"function `{read.name}` (files, other databases and settings are out of "
                f"reach of transform SQL) in {query!r}"
            )
            raise SqlError(msg)
        if read.kind == "SHOW_REF":
            msg = (
                f"expected the query to read only the batch `{name}`; got a SHOW, "
                f"DESCRIBE or SUMMARIZE of `{read.name}` (the catalog and settings are "
                f"out of reach of transform SQL) in {query!r}"
            )
            raise SqlError(msg)
        if read.kind == "BASE_TABLE" and not read.cte and read.name != name.lower():
            msg = (
                f"expected the query to read only the batch `{name}` (and the CTEs in "
                f"scope where it is read); got the relation {read.name!r} in {query!r}"
            )
            raise SqlError(msg)


def _calls(node: Any, names: frozenset[str]) -> bool:
    """Whether ``node`` calls one of ``names`` outside subqueries and window functions."""
    if isinstance(node, list):
        return any(_calls(v, names) for v in node)
    if not isinstance(node, dict):
        return False
    if node.get("class") in ("SUBQUERY", "WINDOW"):
        return False
    if node.get("class") == "FUNCTION" and str(node.get("function_name")).lower() in names:
        return True
    return any(_calls(v, names) for v in node.values())


def _template(select_list: str) -> list[Any]:
    tree = _serialize(f"SELECT {select_list} FROM t")  # noqa: S608 - constant text
    items: list[Any] = tree["statements"][0]["node"]["select_list"]
    return items


def plan_transform(query: str, *, name: str) -> TransformPlan:
    """Check a transform query over the relation ``name`` and plan how it keeps lineage.

    Raises:
        SqlError: When ``query`` is not exactly one ``SELECT`` or reads anything but the
            batch, its own CTEs and ``unnest`` / ``range`` / ``generate_series``.
    """
    check_query(query)
    tree = _serialize(query)
    _check_reads(tree, query, name)
    _connection()
    aggregates: frozenset[str] = _cache["aggregates"]
    multiplies = any(
        str(n.get("function_name", "")).lower() in _MULTIPLIERS
        or str(n.get("function", {}).get("function_name", "")).lower() in _MULTIPLIERS
        for n in _walk(tree)
        if n.get("class") == "FUNCTION" or n.get("type") == "TABLE_FUNCTION"
    )
    params = frozenset(
        entry["key"]
        for entry in tree["statements"][0].get("named_param_map") or []
        if isinstance(entry, dict) and isinstance(entry.get("key"), str)
    )
    top = tree["statements"][0]["node"]
    modifiers = [m.get("type") for m in top.get("modifiers", [])]
    if top.get("type") != "SELECT_NODE" or "DISTINCT_MODIFIER" in modifiers:
        return TransformPlan(query, query, LineageMode.AS_WRITTEN, multiplies, params)
    grouped = bool(top.get("group_expressions")) or top.get("aggregate_handling") not in (
        None,
        "STANDARD_HANDLING",
    )
    if grouped or _calls(top.get("select_list"), aggregates) or top.get("having"):
        mode = LineageMode.AGGREGATE
        extra = _template(f"max({ROW}) AS {ROW}, list({ROW} ORDER BY {ROW}) AS {ROWS}")
    else:
        mode = LineageMode.ROW
        extra = _template(f"{quote_ident(ROW)} AS {ROW}")
    rewritten = copy.deepcopy(tree)
    rewritten["statements"][0]["node"]["select_list"].extend(extra)
    try:
        sql = _deserialize(rewritten)
    except require("duckdb", extra="sql").Error as exc:  # pragma: no cover - DuckDB bug
        msg = f"expected a query DuckDB can plan; got {query!r}: {first_line(exc)}"
        raise SqlError(msg) from exc
    return TransformPlan(query, sql, mode, multiplies, params)
