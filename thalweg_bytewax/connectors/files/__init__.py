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

from thalweg_bytewax._lazy import lazy_reexports

if TYPE_CHECKING:
    from ._limits import DEFAULT_LIMITS as DEFAULT_LIMITS
    from ._limits import FileLimits as FileLimits
    from ._limits import XmlLimits as XmlLimits
    from ._split import FilesOut as FilesOut
    from ._split import split_rejects as split_rejects
    from .config import DEFAULT_BATCH_ROWS as DEFAULT_BATCH_ROWS
    from .config import FileFormat as FileFormat
    from .config import FileSourceConfig as FileSourceConfig
    from .source import FileSource as FileSource

__getattr__, __dir__ = lazy_reexports(globals())
