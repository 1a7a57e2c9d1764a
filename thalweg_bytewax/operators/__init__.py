"""Bytewax operators of thalweg-bytewax.

Use them the way Bytewax operators are used::

    import thalweg_bytewax.operators as twg

    decoded = twg.decode("decode", raw, codec)
    checked = twg.validate("validate", decoded.ok, contract, mode=twg.ContractMode.QUARANTINE)

Every operator takes ``step_id`` first and the upstream stream ``up`` second, with
options keyword-only. The names their signatures and docs use (output dataclasses,
modes, rules, metadata policies) are exported here too.

Each name loads its module on first use, so a flow pays at start-up only for the
operators it uses (``decode`` alone does not load the contracts, SQL, window or WASM
machinery).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_package

if TYPE_CHECKING:
    from thalweg_bytewax.contracts.ruleset import RuleSet
    from thalweg_bytewax.contracts.spec import ContractMode, ContractSpec, DropRule, Rule
    from thalweg_bytewax.operators.batching import ToBatchesOut, to_batches
    from thalweg_bytewax.operators.decoding import DecodeOut, decode
    from thalweg_bytewax.operators.deduplication import dedup
    from thalweg_bytewax.operators.records import to_dicts, to_raw_records
    from thalweg_bytewax.operators.sidecar import FlightTransformOut, flight_transform
    from thalweg_bytewax.operators.sql import sql
    from thalweg_bytewax.operators.validation import ValidateOut, failed_rules_column, validate
    from thalweg_bytewax.operators.wasm import WasmOut, wasm_map, wasm_sql
    from thalweg_bytewax.operators.windowing import (
        Session,
        Sliding,
        Tumbling,
        WindowAggOut,
        WindowAggStats,
        window_agg,
    )
    from thalweg_bytewax.records import RawRecord
    from thalweg_bytewax.windows.event_time import DEFAULT_ALLOWED_SKEW

# Public name -> the module that defines it, imported on first access.
_LAZY = {
    "ValidateOut": "thalweg_bytewax.operators.validation",
    "failed_rules_column": "thalweg_bytewax.operators.validation",
    "validate": "thalweg_bytewax.operators.validation",
    "dedup": "thalweg_bytewax.operators.deduplication",
    "DecodeOut": "thalweg_bytewax.operators.decoding",
    "decode": "thalweg_bytewax.operators.decoding",
    "to_dicts": "thalweg_bytewax.operators.records",
    "to_raw_records": "thalweg_bytewax.operators.records",
    "FlightTransformOut": "thalweg_bytewax.operators.sidecar",
    "flight_transform": "thalweg_bytewax.operators.sidecar",
    "ToBatchesOut": "thalweg_bytewax.operators.batching",
    "to_batches": "thalweg_bytewax.operators.batching",
    "sql": "thalweg_bytewax.operators.sql",
    "ContractMode": "thalweg_bytewax.contracts.spec",
    "ContractSpec": "thalweg_bytewax.contracts.spec",
    "DropRule": "thalweg_bytewax.contracts.spec",
    "Rule": "thalweg_bytewax.contracts.spec",
    "RuleSet": "thalweg_bytewax.contracts.ruleset",
    "DEFAULT_ALLOWED_SKEW": "thalweg_bytewax.windows.event_time",
    "MetadataColumns": "thalweg_bytewax.records",
    "MetadataPolicy": "thalweg_bytewax.records",
    "RawRecord": "thalweg_bytewax.records",
    "Session": "thalweg_bytewax.operators.windowing",
    "Sliding": "thalweg_bytewax.operators.windowing",
    "Tumbling": "thalweg_bytewax.operators.windowing",
    "WindowAggOut": "thalweg_bytewax.operators.windowing",
    "WindowAggStats": "thalweg_bytewax.operators.windowing",
    "window_agg": "thalweg_bytewax.operators.windowing",
    "WasmOut": "thalweg_bytewax.operators.wasm",
    "wasm_map": "thalweg_bytewax.operators.wasm",
    "wasm_sql": "thalweg_bytewax.operators.wasm",
}

__all__: list[str] = []
__all__ += ["ValidateOut", "dedup", "failed_rules_column", "validate"]
__all__ += ["DecodeOut", "decode", "to_dicts", "to_raw_records"]
__all__ += ["ToBatchesOut", "to_batches"]
__all__ += ["FlightTransformOut", "flight_transform"]
__all__ += ["ContractMode", "ContractSpec", "DropRule", "Rule", "RuleSet"]
__all__ += ["DEFAULT_ALLOWED_SKEW", "MetadataColumns", "MetadataPolicy", "RawRecord"]
__all__ += ["sql"]
__all__ += ["Session", "Sliding", "Tumbling", "WindowAggOut", "WindowAggStats", "window_agg"]
__all__ += ["WasmOut", "wasm_map", "wasm_sql"]

__getattr__, __dir__ = lazy_package(__name__, _LAZY, globals())


class _OperatorsPackage(ModuleType):
    """This package's module type: its attribute ``sql`` is always the operator.

    The submodule ``operators.sql`` has the operator's name, and the import system binds
    a submodule to its package's attribute once it is loaded (by ``twg.sql``, or by
    ``operators.sql_dag`` importing it): the operator is bound in its place. ``sql``
    loads on first use like the other operators, so a flow that only decodes does not
    load the SQL and WASM machinery.
    """

    def __setattr__(self, name: str, value: object) -> None:
        if name == "sql" and isinstance(value, ModuleType) and value.__name__ == _SQL_MODULE:
            value = value.sql
        super().__setattr__(name, value)


_SQL_MODULE = _LAZY["sql"]
sys.modules[__name__].__class__ = _OperatorsPackage
