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

from thalweg_bytewax._lazy import lazy_package

if TYPE_CHECKING:
    from ._partition import ArrowIPCSinkStats
    from .config import ArrowIPCSinkConfig, ArrowIPCSourceConfig
    from .sink import ArrowIPCSink
    from .source import ArrowIPCSource

# Public name -> the submodule that defines it, imported on first access.
_LAZY = {
    "ArrowIPCSink": ".sink",
    "ArrowIPCSinkConfig": ".config",
    "ArrowIPCSinkStats": "._partition",
    "ArrowIPCSource": ".source",
    "ArrowIPCSourceConfig": ".config",
}

__all__ = [
    "ArrowIPCSink",
    "ArrowIPCSinkConfig",
    "ArrowIPCSinkStats",
    "ArrowIPCSource",
    "ArrowIPCSourceConfig",
]

__getattr__, __dir__ = lazy_package(__name__, _LAZY, globals())
