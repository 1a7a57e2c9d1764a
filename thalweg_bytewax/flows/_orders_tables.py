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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from thalweg_bytewax.config import SecretRef
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig
from thalweg_bytewax.connectors.iceberg.config import DEFAULT_KEEP_SNAPSHOTS
from thalweg_bytewax.flows._orders_sql import REVENUE_KEY, TABLES
from thalweg_bytewax.pipeline._summary import TableCount, iceberg_rows, postgres_rows

__all__ = ["ICEBERG_SHARDS", "PG_SHARDS", "TableTargets", "sink_sections"]

PG_SHARDS = 4
"""PostgreSQL sink partitions per table: one per sample partition (the sink's default of
16 would hold 16 connections per table for four source partitions)."""

ICEBERG_SHARDS = 4
"""Iceberg sink partitions per appended table: a shard on each of up to four workers, so
each writes the partitions it reads (one commit per worker and epoch); the upserted
window table keeps one writer."""

_WINDOWED = "revenue_per_status_minute"
# Step names of the sinks (ice_<short>, pg_<short>): short, as the docstring draws them.
_SHORT = {"orders": "orders", "order_lines": "lines", _WINDOWED: "revenue"}
# The stream of the pipeline each table is fed from: the SQL DAG's outputs and the window.
_STREAMS = {"orders": "orders", "order_lines": "order_lines", _WINDOWED: "revenue"}


def sink_sections(
    namespace: str,
    *,
    postgres_dsn: SecretRef | None,
    postgres_schema: str,
    keep_snapshots: int | None = DEFAULT_KEEP_SNAPSHOTS,
) -> dict[str, dict[str, Any]]:
    """The ``[sinks]`` of the orders pipeline: each table to Iceberg, and to PostgreSQL.

    ``ice_<short>`` then ``pg_<short>`` table by table (the PostgreSQL sinks only with a
    DSN, kept as the secret reference so no output prints it); the window table is
    upserted on its key by one writer, the others appended by shards.

    Args:
        namespace: The Iceberg namespace of the tables.
        postgres_dsn: The PostgreSQL DSN, or None for Iceberg only.
        postgres_schema: The PostgreSQL schema of the tables.
        keep_snapshots: Snapshots each Iceberg table's history keeps (None: all).
    """
    sinks: dict[str, dict[str, Any]] = {}
    for table in TABLES:
        stream = _STREAMS[table]
        upsert: dict[str, Any] = (
            {"mode": "upsert", "key_columns": list(REVENUE_KEY)} if table == _WINDOWED else {}
        )
        sinks[f"ice_{_SHORT[table]}"] = {
            "kind": "iceberg",
            "from": stream,
            "table": f"{namespace}.{table}",
            "keep_snapshots": keep_snapshots,
            **(upsert or {"shards": ICEBERG_SHARDS}),
        }
        if postgres_dsn is not None:
            sinks[f"pg_{_SHORT[table]}"] = {
                "kind": "postgres",
                "from": stream,
                "table": table,
                "dsn": postgres_dsn,
                "optional": True,
                "schema": postgres_schema,
                "shards": PG_SHARDS,
                **upsert,
            }
    return sinks


class TableTargets:
    """Where the orders flow's tables go: an Iceberg warehouse, and maybe PostgreSQL.

    Args:
        warehouse: The Iceberg warehouse directory (SQL catalog on SQLite there).
        namespace: The Iceberg namespace of the tables.
        postgres_dsn: A PostgreSQL DSN (a secret), or None for Iceberg only.
        postgres_schema: The PostgreSQL schema of the tables.
    """

    def __init__(
        self,
        warehouse: Path,
        namespace: str,
        *,
        postgres_dsn: str | None = None,
        postgres_schema: str = "public",
    ) -> None:
        self.catalog = IcebergCatalogConfig(warehouse=os.fspath(warehouse))
        self.warehouse = warehouse
        self.namespace = namespace
        self._dsn = postgres_dsn
        self.postgres_schema = postgres_schema

    def counts(self) -> list[TableCount]:
        """How the summary reads each table's row count back."""
        where = f"iceberg {self.warehouse}"
        out = []
        for t in TABLES:
            name = f"{self.namespace}.{t}"
            out.append(TableCount(name, where, iceberg_rows(self.catalog, name)))
        if self._dsn:
            for t in TABLES:
                rows = postgres_rows(self._dsn, self.postgres_schema, t)
                out.append(TableCount(f"{self.postgres_schema}.{t}", "postgres", rows))
        return out

    def describe(self) -> Sequence[str]:
        """Where the tables go, as the docs and logs name it (never the DSN)."""
        where = [f"iceberg {self.warehouse} (namespace {self.namespace})"]
        if self._dsn:
            where.append(f"postgres (schema {self.postgres_schema})")
        return where
