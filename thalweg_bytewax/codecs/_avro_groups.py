"""Decode one writer schema's group of rows: the fast path, the structural scan, the exact path.

Private to :mod:`thalweg_bytewax.codecs.avro`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs import _avro_fast, _avro_scan
from thalweg_bytewax.codecs._avro_decode import (
    _decode_exact_rows,
    _empty,
    _project,
    _structural_failures,
)
from thalweg_bytewax.codecs._avro_resolve import _named_docs, _Plan, _Writer
from thalweg_bytewax.codecs._gc import gc_paused
from thalweg_bytewax.codecs.base import DecodeFailure, FailureKind

__all__ = ["decode_group"]


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
    appended to ``failures``.
    """
    if plan.error is not None:
        failures.extend(DecodeFailure(int(i), FailureKind.SCHEMA_MISMATCH, plan.error) for i in idx)
        return idx[:0], _empty(schema)
    off = int(offsets[idx[0]])
    taken = arr if len(idx) == len(arr) else arr.take(pa.array(idx, pa.int64()))
    bodies = pc.binary_slice(taken, off, 2**31 - 1) if off else taken
    if plan.fast:
        if w.header is None:
            w.header = _avro_fast.ocf_header(_avro_fast.ocf_schema_json(w.raw, _named_docs(w)))
        decoded = _avro_fast.decode_block(w.header, w.node, bodies)
        if decoded is not None:
            return idx, _project(decoded, plan, schema)
        if plan.reader is None and _avro_scan.scannable(w.node):
            # Some body broke the block: find the structurally bad ones columnar
            # rather than reading every body with fastavro (a flood of bad rows
            # must cost about what good ones do; see docs/benchmarks.md).
            return _decode_scanned(reader, w, plan, bodies, idx, schema, failures)
    return _decode_exact(reader, w, plan, bodies, idx, schema, failures)


def _decode_scanned(
    reader: _Writer | None,
    w: _Writer,
    plan: _Plan,
    bodies: pa.BinaryArray,
    idx: np.ndarray,
    schema: pa.Schema,
    failures: list[DecodeFailure],
) -> tuple[np.ndarray, pa.RecordBatch]:
    """A group the fast path refused: proven-bad rows rejected, the rest decoded.

    Rows whose record ends exactly at their body's end go to the fast path again
    (then the exact path); rows the scan cannot decide go to the exact path.
    """
    status, read = _avro_scan.scan(w.node, bodies)
    failures.extend(_structural_failures(w.label, idx, status, read, bodies))
    parts: list[tuple[np.ndarray, pa.RecordBatch]] = []
    good = np.flatnonzero(status == _avro_scan.OK)
    if len(good):
        sub = bodies.take(pa.array(good, pa.int64()))
        decoded = None
        if len(good) < len(bodies):  # else the block just refused is the same
            assert w.header is not None  # noqa: S101 - set before the first block
            decoded = _avro_fast.decode_block(w.header, w.node, sub)
        if decoded is not None:
            parts.append((idx[good], _project(decoded, plan, schema)))
        else:
            parts.append(_decode_exact(reader, w, plan, sub, idx[good], schema, failures))
    unsure = np.flatnonzero(status == _avro_scan.UNSURE)
    if len(unsure):
        sub = bodies.take(pa.array(unsure, pa.int64()))
        parts.append(_decode_exact(reader, w, plan, sub, idx[unsure], schema, failures))
    if not parts:
        return idx[:0], _empty(schema)
    if len(parts) == 1:
        return parts[0]
    rows = np.concatenate([r for r, _ in parts])
    return rows, pa.concat_batches([b for _, b in parts])


def _decode_exact(
    reader: _Writer | None,
    w: _Writer,
    plan: _Plan,
    bodies: pa.BinaryArray,
    idx: np.ndarray,
    schema: pa.Schema,
    failures: list[DecodeFailure],
) -> tuple[np.ndarray, pa.RecordBatch]:
    with gc_paused():  # a dict per record, freed by refcount: see codecs._gc
        return _decode_exact_rows(reader, w, plan, bodies, idx, schema, failures)
