"""PostgreSQL output: a table provisioned from the batches, every record exactly once.

``from thalweg_bytewax.connectors.postgres import PostgresSink`` is the public import
path; the modules behind it may move. See :mod:`.sink` for the guarantee;
:class:`PostgresSinkConfig` is its settings (the DSN typed as a secret).

Each name loads its module on first use: reading the configuration model loads neither
Bytewax nor the connector's client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_reexports

if TYPE_CHECKING:
    from .config import PostgresSinkConfig as PostgresSinkConfig
    from .config import WriteMode as WriteMode
    from .sink import PostgresSink as PostgresSink

__getattr__, __dir__ = lazy_reexports(globals())
