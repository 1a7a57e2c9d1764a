"""Private: one sink's catalog and table, shared by the sink's shards in a process.

An Iceberg sink has several shards (``shards``), each committing its epoch on its own.
Each shard holding its own copy of the table meant its copy was stale as soon as another
shard of the same process had committed: its next commit lost the race in the catalog
(the table's branch had moved) and pyiceberg redid the commit (new manifests, a new
metadata file) on the refreshed table, every epoch, for every shard but one. The shards
of a sink in one process now share one :class:`SharedTable`: one catalog connection and
the table as of the last commit any of them made, and they commit one at a time (the
worker threads of a process share it too), so a commit starts from the table's current
metadata unless another process committed meanwhile.

Processes commit to one table at the same moment, too (every process's shard commits at
the epoch's close): one wins in the catalog, the others' commits are turned away and
redone after a pause. For a SQL catalog on a local SQLite file (the default: a warehouse
directory), the processes commit one after another instead: a commit holds an exclusive
lock on a file beside the catalog (``<catalog>.commits/<table>.lock``, released by the
OS when a process dies), which holds the metadata location of the last commit made
under it; a process whose table is not at that location loads it before committing, so
its commit is not turned away. A writer that takes no lock (another tool) can still win a
race: that commit is turned away and redone as before.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import NoSuchTableError

from thalweg_bytewax.catalog.iceberg import CREATED_TABLE_PROPERTIES

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: the processes' commits race
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from ._catalog_config import IcebergCatalogConfig

__all__ = ["SharedTable", "commit_lock_path"]

logger = logging.getLogger("thalweg_bytewax.connectors.iceberg._partition")

_SQLITE = "sqlite:///"


def commit_lock_path(catalog: IcebergCatalogConfig, table: str) -> str | None:
    """The file a process locks to commit to ``table``: beside a local SQLite catalog.

    None for any other catalog (a server's, or a platform without ``fcntl``).
    """
    if fcntl is None or catalog.type != "sql":
        return None
    uri = catalog.catalog_properties().get("uri", "")
    if not uri.startswith(_SQLITE) or uri == _SQLITE or "?" in uri:
        return None
    database = uri.removeprefix(_SQLITE)
    if database == ":memory:":
        return None
    return os.path.join(f"{database}.commits", f"{table}.lock")


class SharedTable:
    """The catalog and the current table of one sink, for its shards in this process.

    Args:
        catalog: The catalog configuration (opened on first use).
        name: The table, ``namespace.table``.
    """

    def __init__(self, catalog: IcebergCatalogConfig, name: str) -> None:
        self._config = catalog
        self.name = name
        self.lock = threading.RLock()
        """Held while a shard changes the table (provisions or commits)."""
        self._catalog: Catalog | None = None
        self.table: Table | None = None
        """The table as of this process's last load or commit; None before it exists."""
        self._lock_path = commit_lock_path(catalog, name)
        self._properties_checked = False

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the configuration only: a copy opens its own catalog and table."""
        return {"_config": self._config, "name": self.name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Rebuild from :meth:`__getstate__`."""
        self.__init__(state["_config"], state["name"])  # type: ignore[misc]

    @property
    def catalog(self) -> Catalog:
        """The catalog, opened once for the process.

        Raises:
            SinkTerminalError: When the catalog cannot be opened.
        """
        with self.lock:
            if self._catalog is None:
                self._catalog = self._config.load()
            return self._catalog

    def current(self) -> Table | None:
        """The table as last loaded or committed here (loaded once); None when absent."""
        if self.table is None:
            return self.reload()
        return self.table

    @contextmanager
    def committing(self) -> Iterator[None]:
        """Hold the table for a commit: this process's lock, and the catalog's file lock.

        Under the file lock, :attr:`table` is at the last commit made under it (loaded
        again when another process made it); the caller commits and sets :attr:`table`
        to the committed table, whose metadata location is written for the next holder.
        """
        with self.lock:
            path = self._lock_path
            if path is None or fcntl is None:
                yield
                return
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a+b") as file:
                fcntl.flock(file, fcntl.LOCK_EX)
                try:
                    file.seek(0)
                    last = file.read().decode("utf-8", "replace")
                    table = self.table
                    if table is not None and last and last != table.metadata_location:
                        self.table = table.refresh()
                    yield
                    if self.table is not None:
                        file.seek(0)
                        file.truncate()
                        file.write(self.table.metadata_location.encode())
                        file.flush()
                finally:
                    fcntl.flock(file, fcntl.LOCK_UN)

    def check_properties(self) -> None:
        """Warn once when the table lacks a property an epoch-committed table needs.

        A table the sink created has them (``CREATED_TABLE_PROPERTIES``); one created
        elsewhere may keep every metadata file or list one more manifest each epoch.
        """
        table = self.table
        if self._properties_checked or table is None:
            return
        self._properties_checked = True
        missing = {
            name: value
            for name, value in CREATED_TABLE_PROPERTIES.items()
            if table.properties.get(name, "").lower() != value
        }
        if missing:
            settings = ", ".join(f"'{k}'='{v}'" for k, v in missing.items())
            logger.warning(
                "iceberg sink: table `%s` lacks %s; a sink commits every epoch, so without "
                "them the table keeps a metadata file per epoch or lists one more manifest "
                "per epoch; set them with the catalog (ALTER TABLE %s SET TBLPROPERTIES (%s))",
                self.name,
                ", ".join(f"`{k}={v}`" for k, v in missing.items()),
                self.name,
                settings,
            )

    def reload(self) -> Table | None:
        """The table as the catalog holds it now (another process may have committed)."""
        with self.lock:
            try:
                self.table = self.catalog.load_table(self.name)
            except NoSuchTableError:
                self.table = None
            return self.table
