"""Lanes: read every lane back (raw, decoded, DLQ, audit, the rule registry), the DLQ format.

A lane is a directory of finalized Parquet files, as ``ParquetSink`` writes them
(``<lane>/<topic>/<partition>/<first>-<last>.parquet``). Staging files start with ``.``,
so neither these readers nor DuckDB globs ever see a file before its epoch is durable.

```python
from thalweg_bytewax.lanes import lane_stats, read_audit, read_dlq, read_lane

raw = read_lane("thalweg-data/raw")                  # every record, envelope intact
orders = read_lane("thalweg-data/orders")            # decoded rows + locator columns
bad = read_dlq("thalweg-data/dlq", reason="dq")      # DLQ rows of one reason
failed = read_audit("thalweg-data/audit", verdict="fail")
print(lane_stats("thalweg-data/raw").to_pylist())    # records and offsets per partition
```

:func:`~thalweg_bytewax.lanes.read.read_lane` is the one reader
(:mod:`~thalweg_bytewax.lanes.read`). The one dead-letter format, its reason codes and
``read_dlq`` are in :mod:`~thalweg_bytewax.lanes.dlq`; ``read_audit`` and
``read_rule_registry`` live next to the audit lane's schema
(``thalweg_bytewax.contracts.audit``). Each typed reader reads through ``read_lane`` and
is importable from here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Resolved lazily by __getattr__ below: the readers load pyarrow.dataset (~7 MB), which
    # a flow that only imports the DLQ format (every decode and sink does) never needs;
    # each typed reader lives next to its lane's schema and reads through `read_lane`.
    from thalweg_bytewax.contracts.audit import read_audit, read_rule_registry
    from thalweg_bytewax.lanes.dlq import read_dlq
    from thalweg_bytewax.lanes.read import LaneSource, lane_stats, lane_stats_schema, read_lane

__all__ = [
    "LaneSource",
    "lane_stats",
    "lane_stats_schema",
    "read_audit",
    "read_dlq",
    "read_lane",
    "read_rule_registry",
]

_READERS = {
    "LaneSource": "thalweg_bytewax.lanes.read",
    "lane_stats": "thalweg_bytewax.lanes.read",
    "lane_stats_schema": "thalweg_bytewax.lanes.read",
    "read_audit": "thalweg_bytewax.contracts.audit",
    "read_dlq": "thalweg_bytewax.lanes.dlq",
    "read_lane": "thalweg_bytewax.lanes.read",
    "read_rule_registry": "thalweg_bytewax.contracts.audit",
}


def __getattr__(name: str) -> object:
    """Resolve the lane readers on first use (and keep each, as a plain import would)."""
    if name in _READERS:
        value = getattr(importlib.import_module(_READERS[name]), name)
        globals()[name] = value
        return value
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
