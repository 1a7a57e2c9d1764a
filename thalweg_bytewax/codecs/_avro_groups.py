"""Decode one writer schema's group of rows: the fast path, the structural scan, the exact path.

Private to :mod:`thalweg_bytewax.codecs.avro`.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs import _avro_fast, _avro_scan, _avro_walk
from thalweg_bytewax.codecs._avro_decode import (
    _decode_exact_rows,
    _empty,
    _Group,
    _project,
    _structural_failures,
    _walk_refused,
)
from thalweg_bytewax.codecs._avro_resolve import _named_docs, _Plan, _Writer
from thalweg_bytewax.codecs._gc import gc_paused
from thalweg_bytewax.codecs.base import DecodeFailure, FailureKind

__all__ = ["decode_framed", "decode_group"]


def decode_group(
    reader: _Writer | None,
    w: _Writer,
    plan: _Plan,
    schema: pa.Schema,
    arr: pa.BinaryArray,
    idx: np.ndarray,
    offsets: np.ndarray,
    failures: list[DecodeFailure],
) -> tuple[np.ndarray, pa.RecordBatch]:
    """Rows ``idx`` of ``arr`` (writer ``w``, bodies past ``offsets``), decoded as ``plan``.

    The fast path first, then the structural scan, then the exact path; failures are
    appended to ``failures``. Without the native walk, a schema polars may read wrong
    unseen (``_avro_fast.needs_walk``) goes straight to the exact path.
    """
    if plan.error is not None:
        failures.extend(DecodeFailure(int(i), FailureKind.SCHEMA_MISMATCH, plan.error) for i in idx)
        return idx[:0], _empty(schema)
    off = int(offsets[idx[0]])
    taken = arr if len(idx) == len(arr) else arr.take(pa.array(idx, pa.int64()))
    bodies = pc.binary_slice(taken, off, 2**31 - 1) if off else taken
    if plan.fast and (_avro_walk.NATIVE or not _avro_fast.needs_walk(w.node)):
        decoded = _avro_fast.decode_block(_header(w), w.node, bodies)
        if decoded is not None:
            return idx, _project(decoded, plan, schema)
        if plan.reader is None and _avro_scan.scannable(w.node):
            # Some body broke the block: find the structurally bad ones columnar
            # rather than reading every body with fastavro (a flood of bad rows
            # must cost about what good ones do; see docs/benchmarks.md).
            return _decode_scanned(_Group(reader, w, plan, schema, failures), bodies, idx)
    return _decode_exact(_Group(reader, w, plan, schema, failures), bodies, idx)


def decode_framed(
    w: _Writer, plan: _Plan, schema: pa.Schema, arr: pa.BinaryArray, schema_id: int
) -> pa.RecordBatch | None:
    """Every row of ``arr``, Confluent-framed for writer ``w`` (``schema_id``), decoded.

    The usual batch (one writer schema, every body good) in one native pass that peels,
    walks and joins the bodies for polars; ``None`` when that pass is not built, the
    plan does not take the fast path, or some row is not framed so or not proven: the
    caller then peels and decodes group by group, which says which rows and why.
    """
    if plan.error is not None or not plan.fast or not _avro_walk.NATIVE:
        return None
    decoded = _avro_fast.decode_framed(_header(w), w.node, arr, schema_id)
    return None if decoded is None else _project(decoded, plan, schema)


def _header(w: _Writer) -> bytes:
    """The container file header of writer ``w``'s schema, built once."""
    if w.header is None:
        w.header = _avro_fast.ocf_header(_avro_fast.ocf_schema_json(w.raw, _named_docs(w)))
    return w.header


def _decode_scanned(
    g: _Group, bodies: pa.BinaryArray, idx: np.ndarray
) -> tuple[np.ndarray, pa.RecordBatch]:
    """A group the fast path refused: proven-bad rows rejected, the rest decoded.

    Rows whose record ends exactly at their body's end go to the fast path again
    (then the exact path); rows the scan cannot decide go to the exact path.
    """
    w = g.w
    refused = _walk_refused(w, bodies)
    if refused:  # their first bad read comes before any the scan finds (it reads no value)
        rows = np.fromiter(refused, dtype=np.int64, count=len(refused))
        g.failures.extend(
            map(DecodeFailure, idx[rows].tolist(), repeat(FailureKind.MALFORMED), refused.values())
        )
        keep = np.ones(len(bodies), dtype=bool)
        keep[rows] = False
        bodies, idx = bodies.filter(pa.array(keep)), idx[keep]
        if not len(idx):
            return idx, _empty(g.schema)
    status, read = _avro_scan.scan(w.node, bodies)
    g.failures.extend(_structural_failures(w.label, idx, status, read, bodies))
    parts: list[tuple[np.ndarray, pa.RecordBatch]] = []
    good = np.flatnonzero(status == _avro_scan.OK)
    if len(good):
        sub = bodies.take(pa.array(good, pa.int64()))
        decoded = None
        if len(good) < len(bodies):  # else the block just refused is the same
            assert w.header is not None  # noqa: S101 - set before the first block
            decoded = _avro_fast.decode_block(w.header, w.node, sub)
        if decoded is not None:
            parts.append((idx[good], _project(decoded, g.plan, g.schema)))
        else:
            parts.append(_decode_exact(g, sub, idx[good], walked=True))
    unsure = np.flatnonzero(status == _avro_scan.UNSURE)
    if len(unsure):
        sub = bodies.take(pa.array(unsure, pa.int64()))
        parts.append(_decode_exact(g, sub, idx[unsure], walked=True))
    if not parts:
        return idx[:0], _empty(g.schema)
    if len(parts) == 1:
        return parts[0]
    rows = np.concatenate([r for r, _ in parts])
    return rows, pa.concat_batches([b for _, b in parts])


def _decode_exact(
    g: _Group, bodies: pa.BinaryArray, idx: np.ndarray, *, walked: bool = False
) -> tuple[np.ndarray, pa.RecordBatch]:
    """The exact path; ``walked``: the bodies were walked and none refused (not again)."""
    with gc_paused():  # a dict per record, freed by refcount: see codecs._gc
        return _decode_exact_rows(g, bodies, idx, walked=walked)
