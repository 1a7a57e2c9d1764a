"""Bytewax operators of thalweg-bytewax.

Use them the way Bytewax operators are used::

    import thalweg_bytewax.operators as twg

    decoded = twg.decode("decode", raw, codec)
    checked = twg.validate("validate", decoded.ok, contract, mode=twg.ContractMode.QUARANTINE)

Every operator takes ``step_id`` first and the upstream stream ``up`` second, with
options keyword-only. The names their signatures and docs use (output dataclasses,
modes, rules, metadata policies) are exported here too.
"""

from __future__ import annotations

from thalweg_bytewax.contracts.ruleset import RuleSet
from thalweg_bytewax.contracts.spec import ContractMode, ContractSpec, DropRule, Rule
from thalweg_bytewax.metadata import MetadataColumns, MetadataPolicy
from thalweg_bytewax.operators.batching import ToBatchesOut, to_batches
from thalweg_bytewax.operators.decoding import DecodeOut, decode
from thalweg_bytewax.operators.deduplication import dedup
from thalweg_bytewax.operators.records import to_dicts, to_raw_records
from thalweg_bytewax.operators.sql import sql
from thalweg_bytewax.operators.validation import ValidateOut, failed_rules_column, validate
from thalweg_bytewax.operators.windowing import (
    Session,
    Sliding,
    Tumbling,
    WindowAggOut,
    WindowAggStats,
    window_agg,
)
from thalweg_bytewax.record import RawRecord
from thalweg_bytewax.windows import DEFAULT_ALLOWED_SKEW

__all__: list[str] = []
__all__ += ["ValidateOut", "dedup", "failed_rules_column", "validate"]
__all__ += ["DecodeOut", "decode", "to_dicts", "to_raw_records"]
__all__ += ["ToBatchesOut", "to_batches"]
__all__ += ["ContractMode", "ContractSpec", "DropRule", "Rule", "RuleSet"]
__all__ += ["DEFAULT_ALLOWED_SKEW", "MetadataColumns", "MetadataPolicy", "RawRecord"]
__all__ += ["sql"]
__all__ += ["Session", "Sliding", "Tumbling", "WindowAggOut", "WindowAggStats", "window_agg"]
