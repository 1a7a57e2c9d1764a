"""Iceberg output: one commit per epoch, coverage in the snapshot summary, exactly once.

``from thalweg_bytewax.connectors.iceberg import IcebergSink`` is the public import
path; the modules behind it may move. :class:`IcebergSink` (see :mod:`.sink`) opens its
catalog from :class:`IcebergCatalogConfig`, part of its settings,
:class:`IcebergSinkConfig`; :class:`IcebergSinkStats` are its counters.

Each name loads its module on first use: reading the configuration model loads neither
Bytewax nor the connector's client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_package

if TYPE_CHECKING:
    from ._stats import IcebergSinkStats
    from ._summary import COMMIT_KEY, COVERAGE_PREFIX, decode_spans, encode_spans
    from .config import IcebergCatalogConfig, IcebergSinkConfig
    from .sink import IcebergSink, PartitionField

# Public name -> the submodule that defines it, imported on first access.
_LAZY = {
    "COMMIT_KEY": "._summary",
    "COVERAGE_PREFIX": "._summary",
    "IcebergCatalogConfig": ".config",
    "IcebergSink": ".sink",
    "IcebergSinkConfig": ".config",
    "IcebergSinkStats": "._stats",
    "PartitionField": ".sink",
    "decode_spans": "._summary",
    "encode_spans": "._summary",
}

__all__ = [
    "COMMIT_KEY",
    "COVERAGE_PREFIX",
    "IcebergCatalogConfig",
    "IcebergSink",
    "IcebergSinkConfig",
    "IcebergSinkStats",
    "PartitionField",
    "decode_spans",
    "encode_spans",
]

__getattr__, __dir__ = lazy_package(__name__, _LAZY, globals())
