"""Convert the rows of a batch whose one-pass conversion failed, pinpointing the bad ones.

Private to :mod:`thalweg_bytewax.codecs.protobuf`.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from thalweg_bytewax.codecs._proto_arrow import ProtoStats, ValueOutOfRange
from thalweg_bytewax.codecs._proto_resolve import _Resolved
from thalweg_bytewax.codecs.base import DecodeFailure, FailureKind

__all__ = ["pinpoint"]


def pinpoint(
    target: _Resolved, rows: list[tuple[int, Any]], stats: ProtoStats
) -> tuple[pa.RecordBatch, list[DecodeFailure]]:
    """Split a batch whose conversion failed into converted rows and failures.

    Never one columnar pass per row: a columnar pass walks every field of the plan
    and the rows of a large type cost milliseconds each that way. Each row is
    checked alone by the dict path, whose cost follows the row's data (a row stops
    at its first bad value); the rows it accepts convert in one pass. Values only
    Arrow refuses are then isolated by halving, k of them in O(k log n) passes.
    """
    scratch = ProtoStats()  # the check converts nothing: its counts are dropped
    to_dict = target.plan.to_dict
    good: list[tuple[int, Any]] = []
    bad: list[DecodeFailure] = []
    for i, m in rows:
        try:
            to_dict(m, scratch)
            good.append((i, m))
        except (ValueOutOfRange, pa.ArrowException) as exc:
            bad.append(DecodeFailure(i, FailureKind.MALFORMED, f"protobuf payload: {exc}"))
    batches: list[pa.RecordBatch] = []
    _halve(target, good, batches, bad, stats)
    if len(batches) == 1:
        return batches[0], bad
    if not batches:
        return target.plan.record_batch([], stats), bad
    return pa.concat_batches(batches), bad


def _halve(
    target: _Resolved,
    part: list[tuple[int, Any]],
    into: list[pa.RecordBatch],
    bad: list[DecodeFailure],
    stats: ProtoStats,
) -> None:
    """Convert ``part`` in one pass, or its halves (left first: row order holds)."""
    if not part:
        return
    try:
        into.append(target.plan.record_batch([m for _, m in part], stats))
    except (ValueOutOfRange, pa.ArrowException) as exc:
        if len(part) == 1:
            text = f"protobuf payload: {exc}"
            bad.append(DecodeFailure(part[0][0], FailureKind.MALFORMED, text))
            return
        mid = len(part) // 2
        _halve(target, part[:mid], into, bad, stats)
        _halve(target, part[mid:], into, bad, stats)
