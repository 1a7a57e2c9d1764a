"""Arrow Flight plumbing shared by the Flight connectors, the sidecar operator and the CLI.

Core (no Bytewax): the wire protocol the :class:`~thalweg_bytewax.connectors.flight.FlightSink`
speaks (:mod:`.protocol`), the locator check that refuses a sidecar reply that dropped,
reordered or invented rows (:mod:`.locators`), a circuit breaker (:mod:`.breaker`), a
small pool of clients (:mod:`.pool`), the reference sidecar server that
``thalweg sidecar serve`` runs (:mod:`.sidecar`) and a reference table server that
stores what a ``FlightSink`` sends and serves it to a ``FlightSource``
(:mod:`.table_server`).
"""

from __future__ import annotations

__all__: list[str] = []
