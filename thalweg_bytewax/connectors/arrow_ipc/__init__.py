"""Arrow IPC out and in: a directory of ``.arrow`` files, exactly once, read back without decoding.

``from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSink, ArrowIPCSource`` is the
public import path; the modules behind it may move. See :mod:`.sink` for the layout
and :mod:`.source` for the reader; :class:`ArrowIPCSinkConfig` and
:class:`ArrowIPCSourceConfig` are their settings.

Each name loads its module on first use: reading the configuration model loads neither
Bytewax nor the connector's client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_reexports

if TYPE_CHECKING:
    from ._partition import ArrowIPCSinkStats as ArrowIPCSinkStats
    from .config import ArrowIPCSinkConfig as ArrowIPCSinkConfig
    from .config import ArrowIPCSourceConfig as ArrowIPCSourceConfig
    from .sink import ArrowIPCSink as ArrowIPCSink
    from .source import ArrowIPCSource as ArrowIPCSource

__getattr__, __dir__ = lazy_reexports(globals())
