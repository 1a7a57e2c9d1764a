"""Bytewax operators of thalweg-bytewax.

Use them the way Bytewax operators are used::

    import thalweg_bytewax.operators as twg
"""

from __future__ import annotations

__all__: list[str] = []
