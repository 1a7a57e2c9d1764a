"""The transform half of ``flows.orders``: its SQL DAG and its window, defined once.

The DAG runs per batch of clean decoded orders (``twg.sql_dag``), on DuckDB:

* ``enriched`` — every order with ``eur_rate`` and ``amount_eur``, from a fixed rate
  table (a ``VALUES`` CTE: the sample is all EUR; other currencies convert at the rates
  written here, an unknown currency leaves both NULL);
* ``orders`` — the ``orders`` table: ``enriched`` without its line array, plus
  ``line_count``, the shipping address flattened into ``ship_line1`` / ``ship_city`` /
  ``ship_country`` (NULL for digital orders);
* ``order_lines`` — the ``order_lines`` table: one row per element of ``items``, with
  ``line_no`` (from 1) and ``line_amount_eur``; each row keeps its parent order's
  locator and ``_twg_derived_ordinal`` numbers the lines of one order, so the table
  sinks land every line exactly once.

``enriched`` has two dependents, so it is computed once per batch and shared. The
windowed table ``revenue_per_status_minute`` folds ``orders`` into tumbling one-minute
event-time windows per ``status`` (:data:`REVENUE_WINDOW`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from thalweg_bytewax.sql.dag import SqlDag

__all__ = [
    "ORDERS_DAG",
    "REVENUE_AGGS",
    "REVENUE_GROUP_BY",
    "REVENUE_KEY",
    "REVENUE_TIME_COLUMN",
    "REVENUE_WINDOW",
    "TABLES",
    "orders_dag",
    "revenue_window",
]


ORDERS_DAG: list[dict[str, Any]] = [
    {
        "name": "enriched",
        "query": (
            # EUR per unit of each currency: fixed on purpose (a sample flow fetches nothing).
            "WITH rates(currency, eur_rate) AS (VALUES ('EUR', 1.0000), ('USD', 0.9200), "
            "('GBP', 1.1700), ('CHF', 1.0500), ('SEK', 0.0880)) "
            "SELECT input.*, CAST(rates.eur_rate AS DECIMAL(10, 4)) AS eur_rate, "
            "CAST(input.total * rates.eur_rate AS DECIMAL(14, 2)) AS amount_eur "
            "FROM input LEFT JOIN rates ON input.currency = rates.currency"
        ),
    },
    {
        "name": "orders",
        "query": (
            "SELECT * EXCLUDE (items, shipping_address), "
            "shipping_address.line1 AS ship_line1, shipping_address.city AS ship_city, "
            "shipping_address.country AS ship_country, "
            "CAST(len(items) AS INTEGER) AS line_count FROM enriched"
        ),
        "depends_on": ["enriched"],
        "sink": "orders",
    },
    {
        "name": "order_lines",
        "query": (
            "SELECT order_id, created_at, status, "
            "CAST(line.ordinal AS INTEGER) AS line_no, line.item.sku AS sku, "
            "line.item.quantity AS quantity, line.item.unit_price AS unit_price, "
            "CAST(line.item.quantity * line.item.unit_price * eur_rate AS DECIMAL(14, 2)) "
            "AS line_amount_eur "
            "FROM enriched, unnest(list_transform(items, lambda item, i: "
            "{'ordinal': i, 'item': item})) AS l(line)"
        ),
        "depends_on": ["enriched"],
        "sink": "order_lines",
    },
]
"""The DAG's nodes (``SqlDag`` fields); the nodes that feed a table name it as their sink."""

TABLES = ("orders", "order_lines", "revenue_per_status_minute")
"""The tables the flow lands, in the order the summary names them."""

REVENUE_WINDOW = timedelta(minutes=1)
"""The tumbling window of ``revenue_per_status_minute``."""
REVENUE_GROUP_BY = ("status",)
"""The group columns of ``revenue_per_status_minute``."""
REVENUE_TIME_COLUMN = "created_at"
"""The event time the revenue windows are cut on."""
REVENUE_AGGS = {"revenue_eur": ("sum", "amount_eur"), "orders": ("count", "*")}
"""The window's aggregates: revenue in EUR and the number of orders."""
REVENUE_KEY = (*REVENUE_GROUP_BY, "window_start")
"""The upsert key of ``revenue_per_status_minute``: a window result is unique by it."""


def revenue_window(allowed_lateness: timedelta) -> dict[str, Any]:
    """The pipeline's ``[[windows]]`` entry ``revenue``: the window above over ``orders``.

    Args:
        allowed_lateness: How long a window waits for late orders, in event time.
    """
    return {
        "name": "revenue",
        "from": "orders",
        "size": REVENUE_WINDOW,
        "time_column": REVENUE_TIME_COLUMN,
        "group_by": list(REVENUE_GROUP_BY),
        "aggs": {k: list(v) for k, v in REVENUE_AGGS.items()},
        "allowed_lateness": allowed_lateness,
    }


def orders_dag() -> SqlDag:
    """The checked DAG (bound to the decoded schema by ``twg.sql_dag`` at build)."""
    return SqlDag(ORDERS_DAG)
