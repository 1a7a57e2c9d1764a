"""A data directory as DuckDB views: each lane by its name, each Iceberg table as ``ns.table``.

A flow such as ``flows.orders`` lands Parquet lanes (``raw``, ``dlq``, ``audit``,
``rules``, …) and an Iceberg warehouse (a SQL catalog on SQLite, ``warehouse/``) under
one data directory. :func:`open_lake` opens a DuckDB connection, bounded in memory, on
which each lane is a view over the explicit list of its finalized Parquet files, and
each Iceberg table a query names is a view ``namespace.table`` over its current
snapshot, read through pyiceberg into Arrow (DuckDB's iceberg extension is not assumed
to be installable). With a PostgreSQL DSN, each table of the database a query names is
a view ``pg.schema.table``, read through ADBC into Arrow.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from thalweg_bytewax._redact import redact_url
from thalweg_bytewax.errors import ConfigError

if TYPE_CHECKING:
    import duckdb

__all__ = ["Lake", "lane_files", "open_lake", "referenced_tables"]

WAREHOUSE_DIR = "warehouse"
"""The Iceberg warehouse's directory under the data directory (as ``flows.orders`` lays it)."""
CATALOG_NAME = "thalweg"
"""The name of the SQL catalog thalweg's Iceberg sinks write (``IcebergCatalogConfig.name``)."""
PG_CATALOG = "pg"
"""The DuckDB catalog PostgreSQL tables appear in: ``pg.public.orders``."""
_CATALOG_DB = "catalog.db"
_MAX_SCHEMA_RECORD = 4 * 1024 * 1024


def lane_files(lane: Path) -> list[Path]:
    """The finalized Parquet files of a lane directory, sorted.

    Staging files and bookkeeping (any path part under the lane that starts with ``.``
    or ``_``) are left out, so a file is seen only once its epoch is durable.
    """
    files = []
    for path in lane.rglob("*.parquet"):
        parts = path.relative_to(lane).parts
        if not any(p.startswith((".", "_")) for p in parts):
            files.append(path)
    return sorted(files)


def _lanes(data_dir: Path) -> tuple[dict[str, list[Path]], dict[str, Any], list[str]]:
    """Lanes with files; lanes without but with a recorded schema; directories with neither."""
    lanes: dict[str, list[Path]] = {}
    empty: dict[str, Any] = {}
    bare: list[str] = []
    for child in sorted(data_dir.iterdir()):
        if not child.is_dir() or child.name.startswith((".", "_")):
            continue
        if (child / _CATALOG_DB).is_file():  # an Iceberg warehouse: its tables, not a lane
            continue
        files = lane_files(child)
        if files:
            lanes[child.name] = files
        elif (schema := _recorded_schema(child)) is not None:
            empty[child.name] = schema
        else:
            bare.append(child.name)
    return lanes, empty, bare


def _recorded_schema(lane: Path) -> Any:
    """The schema a lane without files recorded (``.thalweg-schema-<n>.arrow``), or None.

    A lane of sub-lanes (``dlq/decode``, ``dlq/contract``) joins their newest schemas.
    """
    import pyarrow as pa

    newest: dict[Path, Path] = {}
    for record in sorted(lane.rglob(".thalweg-schema-*.arrow")):
        newest[record.parent] = record  # sorted: the highest version wins
    schemas = []
    for record in newest.values():
        if record.stat().st_size > _MAX_SCHEMA_RECORD:
            msg = (
                f"query: lane schema record `{record}` is {record.stat().st_size:,} bytes; "
                f"expected at most {_MAX_SCHEMA_RECORD:,} (not written by a thalweg lane?)"
            )
            raise ConfigError(msg)
        try:
            with pa.ipc.open_stream(record.read_bytes()) as reader:
                schemas.append(reader.schema)
        except pa.ArrowInvalid as exc:
            msg = f"query: lane schema record `{record}` does not read as Arrow ({exc})"
            raise ConfigError(msg) from None
    if not schemas:
        return None
    return pa.unify_schemas(schemas, promote_options="permissive")


def referenced_tables(con: duckdb.DuckDBPyConnection, sql: str) -> set[tuple[str, str, str]]:
    """The ``(catalog, schema, table)`` names ``sql`` reads, from DuckDB's own parse tree.

    A part the query leaves out is ``""``. A statement DuckDB cannot serialize (not a
    single ``SELECT``) yields no names; running it then reports its own error.
    """
    rows = con.execute("select json_serialize_sql(?::varchar)", [sql]).fetchall()
    tree = json.loads(rows[0][0]) if rows else {}
    names: set[tuple[str, str, str]] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "BASE_TABLE" and "table_name" in node:
                names.add(
                    (
                        str(node.get("catalog_name") or ""),
                        str(node.get("schema_name") or ""),
                        str(node["table_name"]),
                    )
                )
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    if not tree.get("error"):
        walk(tree.get("statements", []))
    return names


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass
class Lake:
    """An open data directory: a DuckDB connection and what it can read.

    Attributes:
        con: The DuckDB connection with the lanes registered as views.
        data_dir: The data directory.
        lanes: Lane name to its finalized Parquet files.
        empty_lanes: Lanes that hold no file but recorded their schema: views without rows.
        unlanded: Directories that hold neither a file nor a schema yet (a lane nothing
            landed in, e.g. ``dlq`` of a run without rejects): no view.
        tables: Iceberg tables of the warehouse as ``namespace.table``.
        warehouse: The Iceberg warehouse directory (``None`` without one).
        pg_tables: PostgreSQL tables as ``pg.schema.table`` (with a DSN).
        postgres_dsn: The PostgreSQL DSN (a secret, never shown).
    """

    con: duckdb.DuckDBPyConnection
    data_dir: Path
    lanes: dict[str, list[Path]]
    empty_lanes: list[str] = field(default_factory=list)
    unlanded: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    warehouse: Path | None = None
    pg_tables: list[str] = field(default_factory=list)
    postgres_dsn: SecretStr | None = None
    _catalog: Any = field(default=None, repr=False)

    def views(self) -> list[str]:
        """Every name a query can read: the lanes, the Iceberg tables, PostgreSQL's."""
        return sorted([*self.lanes, *self.empty_lanes]) + [*self.tables, *self.pg_tables]

    def load_tables_for(self, sql: str) -> list[str]:
        """Register as views the Iceberg and PostgreSQL tables ``sql`` names (only those).

        Each is read whole into Arrow, in memory: an Iceberg table from its current
        snapshot through pyiceberg, a PostgreSQL table through ADBC.

        Returns:
            The ``namespace.table`` and ``pg.schema.table`` names registered.
        """
        named = referenced_tables(self.con, sql)
        wanted = {f"{s}.{t}" for c, s, t in named if s and not c}
        wanted |= {f"{c}.{s}.{t}" for c, s, t in named if c == PG_CATALOG and s}
        loaded = self._load_iceberg(wanted)
        pg = [t for t in self.pg_tables if t in wanted]
        if pg:
            loaded += self._load_postgres(pg)
        return loaded

    def iceberg_catalog(self) -> Any:
        """The warehouse's pyiceberg SQL catalog, opened on first use."""
        if self._catalog is None:
            from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig

            config = IcebergCatalogConfig(name=CATALOG_NAME, warehouse=str(self.warehouse))
            self._catalog = config.load()
        return self._catalog

    def _load_iceberg(self, wanted: set[str]) -> list[str]:
        loaded = []
        for i, name in enumerate(t for t in self.tables if t in wanted):
            namespace, _, table = name.rpartition(".")
            arrow = self.iceberg_catalog().load_table((namespace, table)).scan().to_arrow()
            self.con.register(f"_twg_iceberg_{i}", arrow)
            self.con.execute(f"create schema if not exists {_quote(namespace)}").fetchall()
            view = f"{_quote(namespace)}.{_quote(table)}"
            self.con.execute(
                f"create or replace view {view} as select * from _twg_iceberg_{i}"  # noqa: S608 - quoted names
            ).fetchall()
            loaded.append(name)
        return loaded

    def _load_postgres(self, names: list[str]) -> list[str]:
        assert self.postgres_dsn is not None  # noqa: S101 - pg_tables come only with a DSN
        self.con.execute(f"attach if not exists ':memory:' as {PG_CATALOG}").fetchall()
        with _pg_connect(self.postgres_dsn) as conn, conn.cursor() as cur:
            for i, name in enumerate(names):
                _, schema, table = name.split(".", 2)
                try:
                    cur.execute(f"select * from {_quote(schema)}.{_quote(table)}")  # noqa: S608 - quoted names
                    arrow = cur.fetch_arrow_table()
                except Exception as exc:  # the driver's text may hold the DSN: not echoed
                    msg = f"query: reading PostgreSQL table `{name}` failed ({type(exc).__name__})"
                    raise ConfigError(msg) from None
                self.con.register(f"_twg_pg_{i}", arrow)
                target = f"{PG_CATALOG}.{_quote(schema)}"
                self.con.execute(f"create schema if not exists {target}").fetchall()
                self.con.execute(
                    f"create or replace view {target}.{_quote(table)} as select * from _twg_pg_{i}"  # noqa: S608 - quoted names
                ).fetchall()
        return names


def _pg_connect(dsn: SecretStr) -> Any:
    """An ADBC connection to PostgreSQL; a failure names the redacted DSN only."""
    from thalweg_bytewax._deps import require

    adbc = require("adbc_driver_postgresql.dbapi", extra="postgres")
    try:
        return adbc.connect(dsn.get_secret_value())
    except Exception as exc:  # the driver's text may hold the DSN: not echoed
        where = redact_url(dsn.get_secret_value()) if "://" in dsn.get_secret_value() else "***"
        msg = (
            f"query: cannot connect to PostgreSQL at `{where}` ({type(exc).__name__}); "
            "check `--postgres` / THALWEG_POSTGRES_DSN"
        )
        raise ConfigError(msg) from None


def _pg_tables(dsn: SecretStr) -> list[str]:
    """The database's tables and views outside the system schemas, as ``pg.schema.table``."""
    with _pg_connect(dsn) as conn, conn.cursor() as cur:
        try:
            cur.execute(
                "select table_schema, table_name from information_schema.tables "
                "where table_schema not in ('pg_catalog', 'information_schema') "
                "order by 1, 2"
            )
            rows = cur.fetchall()
        except Exception as exc:  # the driver's text may hold the DSN: not echoed
            msg = f"query: listing PostgreSQL tables failed ({type(exc).__name__})"
            raise ConfigError(msg) from None
    return [f"{PG_CATALOG}.{schema}.{table}" for schema, table in rows]


def open_lake(
    data_dir: str | os.PathLike[str],
    *,
    memory_limit: str = "1GB",
    postgres_dsn: SecretStr | None = None,
) -> Lake:
    """Open ``data_dir`` for SQL: lanes as views, Iceberg tables listed for loading.

    Args:
        data_dir: The data directory a flow wrote (``thalweg-data`` by default).
        memory_limit: DuckDB's ``memory_limit`` (``"1GB"``, ``"512MB"``); beyond it
            DuckDB spills to disk or fails the query with an out-of-memory error.
        postgres_dsn: A PostgreSQL DSN whose tables are listed for loading too.

    Raises:
        ConfigError: When ``data_dir`` is not a directory.
    """
    import duckdb

    root = Path(data_dir)
    if not root.is_dir():
        msg = (
            f"query: no data directory `{root}`; run a flow first "
            "(`python -m bytewax.run flows.orders`) or pass `--data-dir`"
        )
        raise ConfigError(msg)
    con = duckdb.connect(config={"memory_limit": memory_limit})
    lanes, empty, bare = _lanes(root)
    for name, schema in empty.items():  # no file yet: its recorded schema, no rows
        con.register(f"_twg_empty_{name}", schema.empty_table())
        con.execute(
            f"create view {_quote(name)} as select * from {_quote(f'_twg_empty_{name}')}"  # noqa: S608 - quoted names
        ).fetchall()
    for name, files in lanes.items():
        paths = ", ".join(_literal(str(f)) for f in files)
        con.execute(
            f"create view {_quote(name)} as select * from read_parquet([{paths}], "  # noqa: S608 - quoted names and literals
            "union_by_name = true, hive_partitioning = false)"
        ).fetchall()
    lake = Lake(con, root, lanes, sorted(empty), bare, postgres_dsn=postgres_dsn)
    if postgres_dsn is not None:
        lake.pg_tables = _pg_tables(postgres_dsn)
    warehouse = root / WAREHOUSE_DIR
    if (warehouse / _CATALOG_DB).is_file():
        lake.warehouse = warehouse
        listed = _listed_tables(warehouse / _CATALOG_DB)
        if listed is None:  # not the layout this pyiceberg writes: ask pyiceberg
            catalog = lake.iceberg_catalog()
            listed = [
                ".".join(ident)
                for namespace in catalog.list_namespaces()
                for ident in catalog.list_tables(namespace)
            ]
        lake.tables = sorted(listed)
    return lake


def _listed_tables(catalog_db: Path) -> list[str] | None:
    """The tables of the SQL catalog's SQLite file, read as such (no pyiceberg import).

    Listing is most of what a query over lanes alone needs of the catalog, and opening
    pyiceberg's SQL catalog costs seconds of imports. None when the file does not hold
    the ``iceberg_tables`` table pyiceberg's SQL catalog keeps.
    """
    import sqlite3

    try:
        with contextlib.closing(
            sqlite3.connect(f"{catalog_db.resolve().as_uri()}?mode=ro", uri=True)
        ) as db:
            rows = db.execute(
                "select table_namespace, table_name from iceberg_tables "
                "where catalog_name = ? and (iceberg_type is null or iceberg_type = 'TABLE')",
                [CATALOG_NAME],
            ).fetchall()
    except sqlite3.Error:
        return None
    return [f"{namespace}.{table}" for namespace, table in rows]
