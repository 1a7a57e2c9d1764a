"""Parquet output: the raw lane, durable at each epoch, exactly once across crashes.

``from thalweg_bytewax.connectors.parquet import ParquetSink`` is the public import
path; the modules behind it may move. :class:`ParquetSink` (see :mod:`.sink` for the
layout and the guarantee) is configured by :class:`ParquetSinkConfig`, the same model
its keywords, a pipeline's ``[sinks.<name>]`` table with ``kind = "parquet"`` and the
environment build; its counters are :class:`ParquetSinkStats`.

Each name loads its module on first use: reading the configuration model does not load
Bytewax.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_reexports

if TYPE_CHECKING:
    from ._stream import ParquetSinkStats as ParquetSinkStats
    from .config import ParquetSinkConfig as ParquetSinkConfig
    from .sink import ParquetSink as ParquetSink

__getattr__, __dir__ = lazy_reexports(globals())
