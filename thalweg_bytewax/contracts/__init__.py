"""Data contracts: ODCS v3 loading, rules, tightest-wins merge and vectorised evaluation.

``load_contract(source)`` reads an ODCS v3 YAML contract (local path, http(s) URL or a
pyarrow / fsspec filesystem URL) and resolves it to a :class:`ContractSpec`: per schema
object an Arrow schema, column descriptions, the natural key and the rules.
:func:`thalweg_bytewax.operators.validate` enforces it in a flow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax.contracts.rules import merge_rules
from thalweg_bytewax.contracts.spec import (
    ColumnSpec,
    ContractError,
    ContractMode,
    ContractSpec,
    ContractViolationError,
    DropRule,
    MetricOp,
    ObjectSpec,
    Rule,
    RuleKind,
    RuleOrigin,
)

if TYPE_CHECKING:
    # Resolved lazily at runtime by __getattr__ below; imported here for type checkers.
    from thalweg_bytewax.contracts.odcs import load_contract, parse_contract

__all__ = [
    "ColumnSpec",
    "ContractError",
    "ContractMode",
    "ContractSpec",
    "ContractViolationError",
    "DropRule",
    "MetricOp",
    "ObjectSpec",
    "Rule",
    "RuleKind",
    "RuleOrigin",
    "load_contract",
    "merge_rules",
    "parse_contract",
]


def __getattr__(name: str) -> object:
    # The ODCS loader needs the `contracts` extra; import it only when asked for.
    if name in ("load_contract", "parse_contract"):
        from thalweg_bytewax.contracts import odcs  # noqa: PLC0415

        return getattr(odcs, name)
    msg = f"module `thalweg_bytewax.contracts` has no attribute {name!r}"
    raise AttributeError(msg)
