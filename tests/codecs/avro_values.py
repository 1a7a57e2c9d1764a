"""Shared test helper: Arrow values in the shape fastavro returns."""

from __future__ import annotations

from typing import Any

import pyarrow as pa


def plain(value: Any, t: pa.DataType) -> Any:
    """Arrow ``to_pylist`` values in the shape fastavro returns (maps as dicts)."""
    if value is None:
        return None
    if pa.types.is_map(t):
        return {k: plain(v, t.item_type) for k, v in value}
    if pa.types.is_struct(t):
        return {f.name: plain(value[f.name], f.type) for f in t}
    if pa.types.is_list(t):
        return [plain(v, t.value_type) for v in value]
    return value
