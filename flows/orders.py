"""The flagship flow, from a checkout: ``python -m bytewax.run flows.orders``.

It is :mod:`thalweg_bytewax.flows.orders`, which ships with the package (an installation
runs it with ``thalweg run orders``); its docstring lists every ``THALWEG_*`` variable
it reads. This module is the example a flow of your own starts from: it imports the
settings and the builder, and exposes ``flow`` (and the ``thalweg recover`` hooks);
``flow`` is built the first time it is read, so importing the module for its settings
builds no dataflow.
"""

from __future__ import annotations

from bytewax.dataflow import Dataflow

from thalweg_bytewax.flows import orders as _orders
from thalweg_bytewax.flows.orders import (
    CONTRACT,
    SCHEMA_DIR,
    OrdersSettings,
    build_flow,
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

flow: Dataflow
"""The flagship's dataflow, built when it is first read (as the bundled module's)."""


def __getattr__(name: str) -> Dataflow:
    """``flow``: the bundled module's, built the first time it is read."""
    if name != "flow":
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    return _orders.flow
