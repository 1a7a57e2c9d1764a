"""A step's check that a batch has the columns it reads, naming the ones it lacks."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from thalweg_bytewax.errors import ConfigError, ThalwegError

__all__ = ["require_columns"]


def require_columns(
    batch: pa.RecordBatch,
    names: Iterable[str],
    *,
    where: str,
    kind: str = "",
    hint: str = "",
    error: type[ThalwegError] = ConfigError,
) -> None:
    """Raise ``error`` when ``batch`` lacks any of ``names``.

    The message reads ``<where>: expected <kind> column(s) [...] in the batch; got
    [...]<hint>``: the columns missing, in the order of ``names``, then the batch's own.

    Args:
        batch: The batch the step is about to read.
        names: The columns the step reads.
        where: The step as messages name it (``dedup``, ``wasm_map `c2f```).
        kind: What the columns are to the step (``key``), or empty.
        hint: Text appended to the message (what to check).
        error: The error raised.
    """
    have = batch.schema.names
    missing = [n for n in names if n not in have]
    if missing:
        what = f"{kind} column(s)" if kind else "column(s)"
        msg = f"{where}: expected {what} {missing!r} in the batch; got {have!r}{hint}"
        raise error(msg)
