"""Old module names that keep working for one release after their module moved.

When a module moves to another folder, its old dotted name goes into :data:`MOVED`
beside the new one. Importing the old name then warns with a
:class:`DeprecationWarning` that says where the module lives now, and gives the
module at its new home (the same module object, so ``isinstance`` and ``is`` hold).

This also keeps users' data readable across the move: Bytewax pickles source, sink
and operator state into its recovery store by module and class name, and a store
written before a move names the old module. Unpickling imports that name, which
resolves here.

Names that moved out of a module that stays get the same treatment from
:func:`moved_names`: the module's ``__getattr__`` answers the old name with the value
at its new home and the same warning.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

__all__ = ["MOVED", "install", "moved_names"]

_CONNECTORS = "thalweg_bytewax.connectors"

#: Old dotted module name -> the dotted name of the module's new home.
MOVED: dict[str, str] = {
    "thalweg_bytewax._apache_kafka": "thalweg_bytewax.dev._apache_kafka",
    "thalweg_bytewax._dev_postgres": "thalweg_bytewax.dev._postgres",
    "thalweg_bytewax._fixed_port": "thalweg_bytewax.dev._fixed_port",
    "thalweg_bytewax._json_schema_doc": "thalweg_bytewax.schemamodel._json_schema_doc",
    "thalweg_bytewax._lane_schema": "thalweg_bytewax.lanes._schema",
    "thalweg_bytewax._mock_broker": "thalweg_bytewax.dev._mock_broker",
    "thalweg_bytewax._published": "thalweg_bytewax.dev._published",
    "thalweg_bytewax._sample_columns": "thalweg_bytewax.dev._sample_columns",
    "thalweg_bytewax.coverage_postgres": "thalweg_bytewax.coverage.postgres",
    "thalweg_bytewax.coverage_report": "thalweg_bytewax.coverage.report",
    "thalweg_bytewax.coverage_store": "thalweg_bytewax.coverage.store",
    "thalweg_bytewax.dlq": "thalweg_bytewax.lanes.dlq",
    "thalweg_bytewax.input_span": "thalweg_bytewax.coverage.input_span",
    # Split into several modules of records/: the package exposes every public name the
    # old modules had (Locator, RawRecord, MetadataColumns, record_ids_array, ...).
    "thalweg_bytewax.metadata": "thalweg_bytewax.records",
    "thalweg_bytewax.record": "thalweg_bytewax.records",
    "thalweg_bytewax.recovery_plan": "thalweg_bytewax.coverage.recovery_plan",
    "thalweg_bytewax.runtime._replay_check": "thalweg_bytewax.coverage._replay_check",
    "thalweg_bytewax.runtime.coverage_recording": "thalweg_bytewax.coverage.recording",
    "thalweg_bytewax.samples": "thalweg_bytewax.dev.samples",
    # SQL: one folder; the two modules split along their seams resolve to the package,
    # which exports every name they did.
    "thalweg_bytewax.sqlengine": "thalweg_bytewax.sql",
    "thalweg_bytewax.sqldag": "thalweg_bytewax.sql",
    "thalweg_bytewax.sqlnode": "thalweg_bytewax.sql.node",
    "thalweg_bytewax.lineage": "thalweg_bytewax.sql.lineage",
    "thalweg_bytewax._sqltransform": "thalweg_bytewax.sql._transform",
    "thalweg_bytewax._sqlwatchdog": "thalweg_bytewax.sql._watchdog",
    "thalweg_bytewax._sqlfunctions": "thalweg_bytewax.sql._functions",
    "thalweg_bytewax._sqlreads": "thalweg_bytewax.sql._reads",
    # A module named as a function it defines replaced the package's name of that
    # function with itself once anything imported it.
    "thalweg_bytewax.sql.transform_session": "thalweg_bytewax.sql.sessions",
    # Likewise `observability.metrics`, the module of the function `metrics()`.
    "thalweg_bytewax.observability.metrics": "thalweg_bytewax.observability.meters",
    # Windows: one folder. `thalweg_bytewax.windows`, dedup's key memory before, is
    # that folder's package now; it resolves the key memory's names itself.
    # Connectors: the file source and the raw lane source each in a folder of their own;
    # their private modules keep one name per reader or job there.
    "thalweg_bytewax.connectors.raw_lane_source": "thalweg_bytewax.connectors.raw_lane",
    "thalweg_bytewax.connectors._lane_claim": "thalweg_bytewax.connectors.raw_lane._claim",
    "thalweg_bytewax.connectors._lane_sink": "thalweg_bytewax.connectors.raw_lane._shards",
    "thalweg_bytewax.connectors._lane_store": "thalweg_bytewax.connectors.raw_lane._store",
    "thalweg_bytewax.connectors._xml_shape": "thalweg_bytewax.connectors.files._xml_shape",
    "thalweg_bytewax.connectors._files_avro": "thalweg_bytewax.connectors.files._avro",
    "thalweg_bytewax.connectors._files_avro_items": "thalweg_bytewax.connectors.files._avro_items",
    "thalweg_bytewax.connectors._files_columnar": "thalweg_bytewax.connectors.files._columnar",
    "thalweg_bytewax.connectors._files_common": "thalweg_bytewax.connectors.files._common",
    "thalweg_bytewax.connectors._files_csv": "thalweg_bytewax.connectors.files._csv",
    "thalweg_bytewax.connectors._files_limits": "thalweg_bytewax.connectors.files._limits",
    "thalweg_bytewax.connectors._files_lines": "thalweg_bytewax.connectors.files._lines",
    "thalweg_bytewax.connectors._files_partition": "thalweg_bytewax.connectors.files._partition",
    "thalweg_bytewax.connectors._files_paths": "thalweg_bytewax.connectors.files._paths",
    "thalweg_bytewax.connectors._files_sheets": "thalweg_bytewax.connectors.files._sheets",
    "thalweg_bytewax.connectors._files_workbook": "thalweg_bytewax.connectors.files._workbook",
    "thalweg_bytewax.connectors._files_xml": "thalweg_bytewax.connectors.files._xml",
    "thalweg_bytewax.window_agg": "thalweg_bytewax.windows.aggregate",
    "thalweg_bytewax.window_fold": "thalweg_bytewax.windows.fold",
    # Sinks: one folder per connector (`connectors.parquet` is that folder's package).
    f"{_CONNECTORS}._parquet_partition": f"{_CONNECTORS}.parquet._partition",
    f"{_CONNECTORS}._parquet_encoding": f"{_CONNECTORS}.parquet._encoding",
    f"{_CONNECTORS}._parquet_schema": f"{_CONNECTORS}.parquet._schema",
    f"{_CONNECTORS}._arrow_ipc_sink": f"{_CONNECTORS}.arrow_ipc._partition",
    f"{_CONNECTORS}._arrow_ipc_source": f"{_CONNECTORS}.arrow_ipc._source_partition",
    f"{_CONNECTORS}._iceberg_config": f"{_CONNECTORS}.iceberg.config",
    f"{_CONNECTORS}._iceberg_partition": f"{_CONNECTORS}.iceberg._partition",
    f"{_CONNECTORS}._postgres_coverage": f"{_CONNECTORS}.postgres._coverage",
    f"{_CONNECTORS}._postgres_errors": f"{_CONNECTORS}.postgres._errors",
    f"{_CONNECTORS}._postgres_partition": f"{_CONNECTORS}.postgres._partition",
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a moved module's old name and loads the module from its new home."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new_name = MOVED[spec.name]
        _warn_moved(spec.name, new_name)
        return importlib.import_module(new_name)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was loaded at its new home."""


def _warn_moved(old: str, new: str) -> None:
    """Warn the importer (two frames up, past the import machinery) that ``old`` moved."""
    warnings.warn(
        f"`{old}` moved to `{new}`: import it from there "
        "(the old name will be removed in the next release)",
        DeprecationWarning,
        stacklevel=3,
    )


def moved_names(module: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that answers names which moved to another module.

    The old name is not kept in the module's namespace, so every use of it warns.

    Args:
        module: The ``__name__`` of the module the names moved out of.
        homes: Old name -> the dotted name of the module that holds it now.

    Returns:
        The function to bind as the module's ``__getattr__``.
    """

    def __getattr__(name: str) -> Any:
        """The value of a moved name at its new home, with a deprecation warning."""
        home = homes.get(name)
        if home is None:
            msg = f"module {module!r} has no attribute {name!r}"
            raise AttributeError(msg)
        _warn_moved(f"{module}.{name}", f"{home}.{name}")
        return getattr(importlib.import_module(home), name)

    return __getattr__


def install() -> None:
    """Make the old names in :data:`MOVED` importable (idempotent).

    The finder goes last on ``sys.meta_path``, so it only answers for names no file
    provides any more.
    """
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
