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

from thalweg_bytewax._lazy import lazy_reexports

if TYPE_CHECKING:
    from ._stats import IcebergSinkStats as IcebergSinkStats
    from ._summary import COMMIT_KEY as COMMIT_KEY
    from ._summary import COVERAGE_PREFIX as COVERAGE_PREFIX
    from ._summary import decode_spans as decode_spans
    from ._summary import encode_spans as encode_spans
    from .config import IcebergCatalogConfig as IcebergCatalogConfig
    from .config import IcebergSinkConfig as IcebergSinkConfig
    from .sink import IcebergSink as IcebergSink
    from .sink import PartitionField as PartitionField

__getattr__, __dir__ = lazy_reexports(globals())
