"""Event-time windows over Arrow batches: specs, per-batch partials, folding, clamped time.

The package is layered; each module has one job:

* :mod:`.event_time`: the clamped event time a batch and its records count as (also
  the clock of ``dedup``);
* :mod:`.aggregate`: window specs (``Tumbling``, ``Sliding``, ``Session``) and the
  columnar pre-aggregation of one batch to partials;
* :mod:`.fold`: ``WindowFolder``, one group key's open windows, its watermark and its
  late partials.

The names below load their module on first access.

``thalweg_bytewax.windows`` was, up to this release, the module of dedup's key memory:
its ``SeenWindow`` and ``key_values`` still resolve here, with a
:class:`DeprecationWarning`, for one release (they live in :mod:`thalweg_bytewax.dedup`).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from thalweg_bytewax._lazy import lazy_package, load_lazy

if TYPE_CHECKING:
    from thalweg_bytewax.windows.aggregate import (
        AGG_FUNCTIONS,
        COUNT,
        PANE,
        SOURCE,
        TMAX,
        TMIN,
        Session,
        Sliding,
        Tumbling,
        WindowPlan,
        WindowSpec,
        pre_aggregate,
        split_by_key,
    )
    from thalweg_bytewax.windows.event_time import (
        DEFAULT_ALLOWED_SKEW,
        EventClock,
        batch_time,
        check_allowed_skew,
        clamped_times,
    )
    from thalweg_bytewax.windows.fold import LATE_KEY, WindowFolder, late_schema

_HOMES = {
    "AGG_FUNCTIONS": ".aggregate",
    "COUNT": ".aggregate",
    "PANE": ".aggregate",
    "SOURCE": ".aggregate",
    "TMAX": ".aggregate",
    "TMIN": ".aggregate",
    "Session": ".aggregate",
    "Sliding": ".aggregate",
    "Tumbling": ".aggregate",
    "WindowPlan": ".aggregate",
    "WindowSpec": ".aggregate",
    "pre_aggregate": ".aggregate",
    "split_by_key": ".aggregate",
    "DEFAULT_ALLOWED_SKEW": ".event_time",
    "EventClock": ".event_time",
    "batch_time": ".event_time",
    "check_allowed_skew": ".event_time",
    "clamped_times": ".event_time",
    "LATE_KEY": ".fold",
    "WindowFolder": ".fold",
    "late_schema": ".fold",
}

# The names of dedup's key memory, which lived in this module's place before.
_MOVED_TO_DEDUP = {
    "SeenWindow": "thalweg_bytewax.dedup.key_memory",
    "key_values": "thalweg_bytewax.dedup.key_memory",
}

__all__ = [
    "AGG_FUNCTIONS",
    "COUNT",
    "DEFAULT_ALLOWED_SKEW",
    "LATE_KEY",
    "PANE",
    "SOURCE",
    "TMAX",
    "TMIN",
    "EventClock",
    "Session",
    "Sliding",
    "Tumbling",
    "WindowFolder",
    "WindowPlan",
    "WindowSpec",
    "batch_time",
    "check_allowed_skew",
    "clamped_times",
    "late_schema",
    "pre_aggregate",
    "split_by_key",
]

_load, __dir__ = lazy_package(__name__, _HOMES, globals())


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first access."""
    if name in _MOVED_TO_DEDUP:
        # Not kept in globals(): every use under the old name warns.
        warnings.warn(
            f"`{__name__}.{name}` moved to `{_MOVED_TO_DEDUP[name]}`: import it from "
            "`thalweg_bytewax.dedup` (the old name will be removed in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return load_lazy(__name__, _MOVED_TO_DEDUP, {}, name)
    return _load(name)
