"""Bytewax operators of thalweg-bytewax.

Use them the way Bytewax operators are used::

    import thalweg_bytewax.operators as twg
"""

from __future__ import annotations

from thalweg_bytewax.operators.decoding import DecodeOut, decode
from thalweg_bytewax.operators.deduplication import dedup
from thalweg_bytewax.operators.records import to_dicts, to_raw_records
from thalweg_bytewax.operators.validation import ValidateOut, validate

__all__: list[str] = []
__all__ += ["ValidateOut", "dedup", "validate"]
__all__ += ["DecodeOut", "decode", "to_dicts", "to_raw_records"]
