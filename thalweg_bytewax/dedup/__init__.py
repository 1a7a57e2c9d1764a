"""Deduplication's key memory: which keys were seen within a window of event time.

:class:`SeenWindow` (:mod:`.key_memory`) is the state of ``twg.dedup`` and of the
windowed ``unique`` rules of ``twg.validate``; :func:`key_values` builds the hashable
keys it remembers. Its clock is clamped event time
(:mod:`thalweg_bytewax.windows.event_time`).
"""

from __future__ import annotations

from thalweg_bytewax.dedup.key_memory import SeenWindow, key_values

__all__ = ["SeenWindow", "key_values"]
