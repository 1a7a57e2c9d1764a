"""Private to :mod:`thalweg_bytewax.connectors.files`: a file's format, from its name.

A suffix names the format (``.csv``, ``.parquet``, ...); CSV and NDJSON files may also
end in a compression suffix (``orders.csv.gz``), read through a decompressing stream.
"""

from __future__ import annotations

from thalweg_bytewax._redact import redact_url
from thalweg_bytewax.errors import ConfigError

from ._partition import COMPRESSED_SUFFIXES, path_name
from .config import FileFormat

__all__ = ["SELF_DESCRIBING", "suffix_format"]

_SUFFIXES = {
    ".parquet": FileFormat.PARQUET,
    ".pq": FileFormat.PARQUET,
    ".csv": FileFormat.CSV,
    ".ndjson": FileFormat.NDJSON,
    ".jsonl": FileFormat.NDJSON,
    ".json": FileFormat.NDJSON,
    ".avro": FileFormat.AVRO,
    ".arrow": FileFormat.IPC,
    ".feather": FileFormat.IPC,
    ".ipc": FileFormat.IPC,
    ".xlsx": FileFormat.EXCEL,
    ".xlsm": FileFormat.EXCEL,
    ".xls": FileFormat.EXCEL,
    ".xlsb": FileFormat.EXCEL,
    ".ods": FileFormat.EXCEL,
    ".xml": FileFormat.XML,
}
SELF_DESCRIBING = frozenset({FileFormat.PARQUET, FileFormat.IPC, FileFormat.AVRO})
# Line formats read through a decompressing stream when their name ends in a
# compression suffix (``orders.csv.gz``); the columnar formats compress inside.
_STREAMED = frozenset({FileFormat.CSV, FileFormat.NDJSON})


def suffix_format(path: str) -> FileFormat:
    """The format ``path``'s name says (a compressed name: CSV or NDJSON only).

    Raises:
        ConfigError: When the suffix names none.
    """
    name = path_name(path)
    for compressed in COMPRESSED_SUFFIXES:
        if name.endswith(compressed):
            name = name.removesuffix(compressed)
            for suffix, fmt in _SUFFIXES.items():
                if name.endswith(suffix) and fmt in _STREAMED:
                    return fmt
    for suffix, fmt in _SUFFIXES.items():
        if name.endswith(suffix):
            return fmt
    known = ", ".join(sorted(_SUFFIXES))
    msg = (
        f"file source: `{redact_url(path)}` expected a known suffix ({known}, CSV and "
        f"NDJSON also compressed: .csv.gz); got none; pass `format=`"
    )
    raise ConfigError(msg)
