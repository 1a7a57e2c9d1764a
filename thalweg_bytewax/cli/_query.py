"""``thalweg query SQL``: SQL over what a flow landed — lanes and Iceberg tables — in DuckDB."""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from thalweg_bytewax.cli._subcommand import add_subcommand
from thalweg_bytewax.errors import ConfigError

__all__ = ["add_commands", "run_query"]

DEFAULT_DATA_DIR = Path("thalweg-data")
TABLE_ROWS = 100
_COLUMN_WIDTH = 60
_MAX_WIDTH = 4_000
"""At most this many rows in ``--format table``; the rest are counted, never dropped silently."""


def run_query(
    data_dir: Path, sql: str, *, memory_limit: str = "1GB", postgres_dsn: SecretStr | None = None
) -> Any:
    """Run ``sql`` over the lanes and Iceberg tables of ``data_dir`` (and PostgreSQL's).

    Returns:
        The result as a ``pyarrow.Table``.

    Raises:
        ConfigError: A table the query names does not exist (the message lists the
            views there are) or the query fails.
    """
    import duckdb

    from thalweg_bytewax.cli._lake import open_lake

    lake = open_lake(data_dir, memory_limit=memory_limit, postgres_dsn=postgres_dsn)
    try:
        lake.load_tables_for(sql)
        relation = lake.con.sql(sql)
        if relation is None:  # a statement without a result (SET, CREATE, ...)
            import pyarrow as pa

            return pa.table({})
        return relation.to_arrow_table()
    except duckdb.CatalogException as exc:
        views = ", ".join(lake.views()) or f"none: no lane or table under `{data_dir}`"
        first = str(exc).splitlines()[0]
        unlanded = ", ".join(f"`{name}`" for name in lake.unlanded)
        note = f"; nothing landed in {unlanded} yet, so no view" if unlanded else ""
        msg = f"query: {first}{note}; the views in `{data_dir}` are: {views}"
        raise ConfigError(msg) from None
    except duckdb.Error as exc:
        msg = f"query: {exc}"
        raise ConfigError(msg) from None
    finally:
        lake.con.close()


def _cell(value: Any) -> str:
    """One value as text: bytes as hex, lists and structs as JSON, NULL as nothing."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list | dict):
        return json.dumps(value, default=_cell)
    return str(value)


def _json_safe(value: Any) -> Any:
    """``value`` with NaN and infinities as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.

    JSON has no literal for them (Python's ``NaN`` would make the line unreadable to
    every strict parser), and NULL would claim the value is missing.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _print_table(table: Any) -> None:
    from rich.console import Console
    from rich.measure import Measurement
    from rich.table import Table
    from rich.text import Text

    out = Table()
    for name in table.column_names:
        out.add_column(Text(name), max_width=_COLUMN_WIDTH)  # longer values wrap
    for row in table.slice(0, TABLE_ROWS).to_pylist():
        out.add_row(*(Text(_cell(v)) for v in row.values()))  # Text: values are not markup
    console = Console(soft_wrap=False)
    wide = Measurement.get(console, console.options.update_width(_MAX_WIDTH), out).maximum
    if wide > console.width:  # as wide as the columns need, never cropped: pipe to `less -S`
        console = Console(soft_wrap=False, width=wide)
    console.print(out)
    more = table.num_rows - TABLE_ROWS
    tail = f"; {more:,} more not shown (--format csv or json prints all)" if more > 0 else ""
    rows = "row" if table.num_rows == 1 else "rows"
    console.print(Text(f"{table.num_rows:,} {rows}{tail}"))


def _query(args: argparse.Namespace) -> int:
    """SQL over the lanes and Iceberg tables a flow landed.

    Run one SQL query (DuckDB) over a data directory: each lane (`raw`, `dlq`, `audit`, `rules`,
    ...) is a view by its name, each Iceberg table of the warehouse a view `namespace.table` (e.g.
    `sales.orders`), and with a DSN each PostgreSQL table a view `pg.schema.table`. Without SQL,
    list the views.
    """
    from thalweg_bytewax.cli._lake import open_lake

    data_dir = Path(args.data_dir or os.environ.get("THALWEG_DATA_DIR") or DEFAULT_DATA_DIR)
    dsn = args.postgres or os.environ.get("THALWEG_POSTGRES_DSN")
    postgres_dsn = SecretStr(dsn) if dsn else None
    if not args.sql:
        lake = open_lake(data_dir, memory_limit=args.memory_limit, postgres_dsn=postgres_dsn)
        lake.con.close()
        for name in sorted([*lake.lanes, *lake.empty_lanes]):
            files = len(lake.lanes.get(name, []))
            print(f"{name}  lane, {files:,} Parquet files")
        for name in lake.tables:
            print(f"{name}  Iceberg table")
        for name in lake.pg_tables:
            print(f"{name}  PostgreSQL table")
        for name in lake.unlanded:
            print(f"{name}  nothing landed yet (no view)")
        if not lake.views():
            print(f"no lane or table under `{data_dir}`")
        return 0
    table = run_query(data_dir, args.sql, memory_limit=args.memory_limit, postgres_dsn=postgres_dsn)
    if args.format == "table":
        _print_table(table)
    elif args.format == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(table.column_names)
        for row in table.to_pylist():
            writer.writerow([_cell(v) for v in row.values()])
    else:
        for row in table.to_pylist():
            print(json.dumps(_json_safe(row), default=_cell, allow_nan=False))
    return 0


def add_commands(sub: Any) -> None:
    """Add ``query`` to the CLI's subparsers."""
    query = add_subcommand(sub, "query", _query)
    query.add_argument("sql", nargs="?", help="the query; omit it to list the views")
    query.add_argument(
        "--data-dir",
        type=Path,
        help=f"the data directory (default: $THALWEG_DATA_DIR or {DEFAULT_DATA_DIR})",
    )
    query.add_argument(
        "--postgres",
        metavar="DSN",
        help="also PostgreSQL's tables, as views `pg.schema.table` "
        "(default: $THALWEG_POSTGRES_DSN; prefer the variable, a command line is visible)",
    )
    query.add_argument(
        "--format",
        choices=("table", "csv", "json"),
        default="table",
        help="table (readable, first 100 rows), csv or json (one object per line)",
    )
    query.add_argument(
        "--memory-limit",
        default="1GB",
        help="DuckDB's memory limit, e.g. 512MB or 4GB (default: 1GB)",
    )
