"""Arrow Flight out and in: a Flight server as a sink target and as a source.

``from thalweg_bytewax.connectors.flight import FlightSink, FlightSource`` is the public
import path; the modules behind it may move. See :mod:`.sink` for the exactly-once
protocol with its pipelined ack lane and :mod:`.source` for the reader;
:class:`FlightSinkConfig` and :class:`FlightSourceConfig` are their settings. The
sidecar operator is :func:`thalweg_bytewax.operators.flight_transform`.

Each name loads its module on first use: reading the configuration model loads neither
Bytewax nor the connector's client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_reexports

if TYPE_CHECKING:
    from ._partition import FlightSinkStats as FlightSinkStats
    from .config import FlightSinkConfig as FlightSinkConfig
    from .config import FlightSourceConfig as FlightSourceConfig
    from .sink import FlightSink as FlightSink
    from .source import FlightSource as FlightSource

__getattr__, __dir__ = lazy_reexports(globals())
