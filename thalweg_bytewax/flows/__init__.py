"""The flows that ship with the package, run by name with ``thalweg run NAME``.

* ``orders`` (:mod:`thalweg_bytewax.flows.orders`) — the flagship: orders from Kafka or
  the embedded sample into lanes and Iceberg (and PostgreSQL) tables.
* ``pipeline`` (:mod:`thalweg_bytewax.flows.pipeline`) — the flow a TOML file describes
  (``THALWEG_CONFIG=pipeline.toml thalweg run pipeline``; ``thalweg init`` writes one).

Each is a module with a ``flow`` attribute, so ``python -m bytewax.run
thalweg_bytewax.flows.orders`` runs it too; its schemas, contract and pipeline file are
package data beside it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUNDLED", "ORDERS_CONTRACT", "ORDERS_SCHEMAS"]

BUNDLED = {"orders": "thalweg_bytewax.flows.orders", "pipeline": "thalweg_bytewax.flows.pipeline"}
"""The bundled flows by the name ``thalweg run`` takes, to the module holding ``flow``."""

ORDERS_SCHEMAS = Path(__file__).parent / "schemas"
"""The orders' schema directory: their writer schema as id 1 (``1.avsc``)."""
ORDERS_CONTRACT = Path(__file__).parent / "contracts" / "orders.odcs.yaml"
"""The ODCS contract of the orders."""
