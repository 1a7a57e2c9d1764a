"""Private: what a lane file's footer says it holds — its offsets and its row count.

A lane file's name (``<first>-<last>.parquet``) says which offsets it covers; the name
alone cannot tell an offset the source never had (a transaction marker, a compacted
record, a row an upstream step filtered out of its batch) from a row lost afterwards (a
file truncated or rewritten by hand). The sink writes its claim into the file's
key-value metadata — ``thalweg.first_offset``, ``thalweg.last_offset``,
``thalweg.rows`` — and checks the footer against what it staged before the file gets
its name. A reader whose file still holds the claimed rows under the claimed name
knows the offsets missing inside it were missing when it was written. Files written
before the claim existed carry none and read as they did.
"""

from __future__ import annotations

import pyarrow.parquet as pq

__all__ = ["claim_metadata", "claim_problem", "read_claim"]

_FIRST, _LAST, _ROWS = b"thalweg.first_offset", b"thalweg.last_offset", b"thalweg.rows"


def claim_metadata(first: int, last: int, rows: int) -> dict[bytes, bytes]:
    """The key-value metadata of a lane file holding ``rows`` rows at ``first..last``."""
    return {_FIRST: str(first).encode(), _LAST: str(last).encode(), _ROWS: str(rows).encode()}


def read_claim(meta: pq.FileMetaData) -> tuple[int, int, int] | None:
    """``(first, last, rows)`` from a footer, or None when it carries no valid claim."""
    kv = meta.metadata or {}
    raw = (kv.get(_FIRST), kv.get(_LAST), kv.get(_ROWS))
    if any(v is None or not v.isdigit() or len(v) > 20 for v in raw):  # noqa: PLR2004 - 20 digits: a name's
        return None
    first, last, rows = (int(v) for v in raw if v is not None)
    return first, last, rows


def claim_problem(
    meta: pq.FileMetaData, first: int, last: int, rows: int, column: str
) -> str | None:
    """What in a footer disagrees with a file of ``rows`` rows at ``first..last``, else None.

    Checks the claim, the footer's row count and, where the row groups carry statistics,
    the least and greatest value of the offsets ``column``.
    """
    claim = read_claim(meta)
    if claim != (first, last, rows):
        return (
            f"its footer claims {_claim_text(claim)}; expected {_claim_text((first, last, rows))}"
        )
    if meta.num_rows != rows:
        return f"its footer counts {meta.num_rows} rows; expected {rows}"
    bounds = _offset_bounds(meta, column)
    if bounds is not None and bounds != (first, last):
        return f"its offsets span {bounds[0]}..{bounds[1]}; expected {first}..{last}"
    return None


def _claim_text(claim: tuple[int, int, int] | None) -> str:
    if claim is None:
        return "nothing"
    return f"{claim[2]} rows at offsets {claim[0]}..{claim[1]}"


def _offset_bounds(meta: pq.FileMetaData, column: str) -> tuple[int, int] | None:
    """The least and greatest offset by the row groups' statistics; None if any lacks them."""
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    if column not in names:
        return None
    index = names.index(column)
    lows, highs = [], []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        if group.num_rows == 0:
            continue
        stats = group.column(index).statistics
        if stats is None or not stats.has_min_max:
            return None
        lows.append(int(stats.min))
        highs.append(int(stats.max))
    if not lows:
        return None
    return min(lows), max(highs)
