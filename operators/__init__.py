"""Bytewax operators of thalweg-bytewax.

Use them the way Bytewax operators are used::

    import thalweg_bytewax.operators as twg
"""

from __future__ import annotations

from thalweg_bytewax.operators.deduplication import dedup
from thalweg_bytewax.operators.validation import ValidateOut, validate

__all__: list[str] = []
__all__ += ["ValidateOut", "dedup", "validate"]
