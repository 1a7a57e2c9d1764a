"""The flagship flow, from a checkout: ``python -m bytewax.run flows.orders``.

It is :mod:`thalweg_bytewax.flows.orders`, which ships with the package (an installation
runs it with ``thalweg run orders``); its docstring lists every ``THALWEG_*`` variable
it reads. This module is the example a flow of your own starts from: it imports the
settings and the builder, and exposes ``flow`` (and the ``thalweg recover`` hooks).
"""

from __future__ import annotations

from thalweg_bytewax.flows.orders import (
    CONTRACT,
    SCHEMA_DIR,
    OrdersSettings,
    build_flow,
    flow,
    recovery_flow,
    recovery_lane,
)

__all__ = [
    "CONTRACT",
    "SCHEMA_DIR",
    "OrdersSettings",
    "build_flow",
    "flow",
    "recovery_flow",
    "recovery_lane",
]
