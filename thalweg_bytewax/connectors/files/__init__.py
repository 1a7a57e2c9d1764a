"""Files as a source: Parquet, CSV, NDJSON, Avro, Arrow IPC, Excel and XML, as batches.

``from thalweg_bytewax.connectors.files import FileSource`` is the public import path.
:class:`FileSource` (module ``source``) reads files into keyed batches, one partition per
file; :class:`FileSourceConfig` (module ``config``) is its settings, the one object a
constructor's keywords, a pipeline's ``[source]`` table (``kind = "files"``) and the
``THALWEG_SOURCE__*`` variables all build; :func:`split_rejects` separates its DLQ
batches. The private modules behind them are one reader per format (``_csv``,
``_lines`` for NDJSON, ``_avro``, ``_columnar`` for Parquet and IPC, ``_sheets`` for
Excel, ``_xml``), the partition of one file (``_partition``) and the bounds every reader
checks (``_limits``), a file's format from its name (``_formats``) and
:func:`split_rejects` (``_split``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_package

if TYPE_CHECKING:
    from ._limits import DEFAULT_LIMITS, FileLimits, XmlLimits
    from ._split import FilesOut, split_rejects
    from .config import DEFAULT_BATCH_ROWS, FileFormat, FileSourceConfig
    from .source import FileSource

# Public name -> the submodule that defines it, imported on first access (reading a
# configuration loads no reader).
_LAZY = {
    "DEFAULT_BATCH_ROWS": ".config",
    "DEFAULT_LIMITS": "._limits",
    "FileFormat": ".config",
    "FileLimits": "._limits",
    "FileSource": ".source",
    "FileSourceConfig": ".config",
    "FilesOut": "._split",
    "XmlLimits": "._limits",
    "split_rejects": "._split",
}

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "DEFAULT_LIMITS",
    "FileFormat",
    "FileLimits",
    "FileSource",
    "FileSourceConfig",
    "FilesOut",
    "XmlLimits",
    "split_rejects",
]

__getattr__, __dir__ = lazy_package(__name__, _LAZY, globals())
