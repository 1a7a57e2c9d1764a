"""Fault injection for crash tests: kill this process at a named point.

Set ``THALWEG_FAULT=<point>[:<nth>]`` (e.g. ``parquet.after_finalize:2``) and the
process SIGKILLs itself the ``nth`` time (default first) execution reaches
:func:`checkpoint` with that name. Unset, a checkpoint costs one dict lookup.
"""

from __future__ import annotations

import os
import signal

__all__ = ["checkpoint"]

_ENV = "THALWEG_FAULT"
_hits: dict[str, int] = {}


def _armed() -> tuple[str, int] | None:
    spec = os.environ.get(_ENV)
    if not spec:
        return None
    point, _, nth = spec.partition(":")
    return point, int(nth) if nth else 1


def checkpoint(point: str) -> None:
    """SIGKILL the process if ``THALWEG_FAULT`` names ``point`` and its count is reached."""
    armed = _armed()
    if armed is None or armed[0] != point:
        return
    _hits[point] = _hits.get(point, 0) + 1
    if _hits[point] >= armed[1]:
        os.kill(os.getpid(), signal.SIGKILL)
