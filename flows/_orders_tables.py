"""The tables ``flows.orders`` lands: their sinks, and how the summary counts their rows.

Iceberg always (a SQL catalog on SQLite under the lake: no service), PostgreSQL too when
a DSN is given. ``orders`` and ``order_lines`` carry their source locator (an order
line its parent's, plus ``_twg_derived_ordinal``), so both sinks land them exactly once
and record their coverage beside the raw lane; ``revenue_per_status_minute`` holds
window results, which have no locator: it is upserted on (``status``,
``window_start``), effectively once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bytewax.outputs import Sink

from flows._orders_sql import REVENUE_KEY, TABLES
from flows._summary import TableCount
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig, IcebergSink

__all__ = ["PG_SHARDS", "TableTargets"]

PG_SHARDS = 4
"""PostgreSQL sink partitions per table: one per sample partition (the sink's default of
16 would hold 16 connections per table for four source partitions)."""

_WINDOWED = "revenue_per_status_minute"
# Step names of the sinks (ice_<short>, pg_<short>): short, as the docstring draws them.
_SHORT = {"orders": "orders", "order_lines": "lines", _WINDOWED: "revenue"}


class TableTargets:
    """Where the orders flow's tables go: an Iceberg warehouse, and maybe PostgreSQL.

    Args:
        warehouse: The Iceberg warehouse directory (SQL catalog on SQLite there).
        namespace: The Iceberg namespace of the tables.
        coverage_store: Where the located tables record their coverage (the raw lane).
        postgres_dsn: A PostgreSQL DSN (a secret), or None for Iceberg only.
        postgres_schema: The PostgreSQL schema of the tables.
    """

    def __init__(
        self,
        warehouse: Path,
        namespace: str,
        *,
        coverage_store: Path,
        postgres_dsn: str | None = None,
        postgres_schema: str = "public",
    ) -> None:
        self.catalog = IcebergCatalogConfig(warehouse=os.fspath(warehouse))
        self.warehouse = warehouse
        self.namespace = namespace
        self.coverage_store = coverage_store
        self._dsn = postgres_dsn
        self.postgres_schema = postgres_schema

    def sinks(self, table: str) -> list[tuple[str, Sink[Any]]]:
        """The ``(step id, sink)`` pairs of one table: Iceberg, then PostgreSQL if set."""
        windowed = table == _WINDOWED
        ice = IcebergSink(
            self.catalog,
            f"{self.namespace}.{table}",
            mode="upsert" if windowed else "append",
            key_columns=REVENUE_KEY if windowed else (),
            locators="absent" if windowed else "required",
            coverage_store=None if windowed else self.coverage_store,
        )
        out: list[tuple[str, Sink[Any]]] = [(f"ice_{_SHORT[table]}", ice)]
        if self._dsn:
            from thalweg_bytewax.connectors.postgres import PostgresSink  # noqa: PLC0415 - extra

            pg = PostgresSink(
                self._dsn,
                table,
                schema=self.postgres_schema,
                mode="upsert" if windowed else "append",
                key_columns=REVENUE_KEY if windowed else None,
                locators="absent" if windowed else "required",
                shards=PG_SHARDS,
                coverage_store=None if windowed else self.coverage_store,
            )
            out.append((f"pg_{_SHORT[table]}", pg))
        return out

    def counts(self) -> list[TableCount]:
        """How the summary reads each table's row count back."""
        where = f"iceberg {self.warehouse}"
        out = []
        for t in TABLES:
            name = f"{self.namespace}.{t}"
            out.append(TableCount(name, where, _iceberg_rows(self.catalog, name)))
        if self._dsn:
            for t in TABLES:
                rows = _pg_rows(self._dsn, self.postgres_schema, t)
                out.append(TableCount(f"{self.postgres_schema}.{t}", "postgres", rows))
        return out

    def describe(self) -> Sequence[str]:
        """Where the tables go, as the docs and logs name it (never the DSN)."""
        where = [f"iceberg {self.warehouse} (namespace {self.namespace})"]
        if self._dsn:
            where.append(f"postgres (schema {self.postgres_schema})")
        return where


def _iceberg_rows(catalog: IcebergCatalogConfig, name: str) -> Callable[[], int | None]:
    def count() -> int | None:
        from pyiceberg.exceptions import (  # noqa: PLC0415 - at run time only
            NoSuchNamespaceError,
            NoSuchTableError,
        )

        try:
            table = catalog.load().load_table(name)
        except (NoSuchTableError, NoSuchNamespaceError):
            return None
        snapshot = table.current_snapshot()
        if snapshot is None:
            return 0
        total = snapshot.summary.get("total-records") if snapshot.summary else None
        return int(total) if total is not None else len(table.scan().to_arrow())

    return count


def _pg_rows(dsn: str, schema: str, table: str) -> Callable[[], int | None]:
    def count() -> int | None:
        import psycopg  # noqa: PLC0415 - the postgres extra, at run time only
        from psycopg import sql  # noqa: PLC0415

        with psycopg.connect(dsn, connect_timeout=10) as conn:
            name = sql.Identifier(schema, table).as_string(conn)
            row = conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()
            if row is None or row[0] is None:
                return None
            query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, table))
            found = conn.execute(query).fetchone()
            return int(found[0]) if found is not None else 0

    return count
