"""Avro batch plumbing: columnar framing peel, the exact path's rows, reassembly.

Private to :mod:`thalweg_bytewax.codecs.avro`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs import _avro_fast, _avro_scan, _avro_walk
from thalweg_bytewax.codecs._avro_resolve import (
    _FIXED_KEY,
    AvroDecodeError,
    _leftover_text,
    _Plan,
    _read,
    _truncated_text,
    _Writer,
)
from thalweg_bytewax.codecs.base import (
    DecodeFailure,
    FailureKind,
    Framing,
)
from thalweg_bytewax.codecs.framing import FramingError, peel, peel_confluent_batch
from thalweg_bytewax.registry import SchemaKey


def _peel(
    framing: Framing,
    arr: pa.BinaryArray,
    header_rows: dict[int, list[tuple[str, bytes | None]]],
    failures: list[DecodeFailure],
) -> tuple[dict[SchemaKey, np.ndarray], np.ndarray]:
    """Row indices per writer schema key, and where each row's body starts.

    Columnar for the Confluent prefix; only rows with a schema-id header
    (``header_rows``, from :func:`._avro_headers.header_rows`) and rows that fail framing are looked
    at one by one.
    """
    n = len(arr)
    nulls = arr.is_null().to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(nulls):
        failures.append(
            DecodeFailure(int(i), FailureKind.NULL_PAYLOAD, "avro: null payload (a tombstone)")
        )
    if framing is Framing.NONE:
        rows = np.flatnonzero(~nulls)
        return ({_FIXED_KEY: rows} if len(rows) else {}), np.zeros(n, dtype=np.int64)
    ids, ok = peel_confluent_batch(arr)
    ok = ok.copy()
    offsets = np.full(n, 5, dtype=np.int64)
    by_guid: dict[SchemaKey, list[int]] = {}
    for row, hdrs in header_rows.items():
        ok[row] = False  # a schema-id header wins over the payload prefix
        if nulls[row]:
            continue
        try:
            ref = peel(b"", hdrs)
        except FramingError as exc:
            failures.append(DecodeFailure(row, exc.kind, f"avro: {exc}"))
            continue
        by_guid.setdefault(ref.key, []).append(row)
        offsets[row] = ref.body_offset
    for i in np.flatnonzero(~ok & ~nulls):
        if int(i) in header_rows:
            continue
        try:
            peel(arr[int(i)].as_py())
        except FramingError as exc:
            failures.append(DecodeFailure(int(i), exc.kind, f"avro: {exc}"))
    groups: dict[SchemaKey, np.ndarray] = {}
    framed = ids[ok]
    if len(framed) and (framed == framed[0]).all():  # one writer schema: the usual batch
        groups[int(framed[0])] = np.flatnonzero(ok)
    elif len(framed):
        uniq = np.unique(framed)
        for u in uniq.tolist():
            groups[int(u)] = np.flatnonzero(ok & (ids == u))
    for key, rows_list in by_guid.items():
        groups[key] = np.asarray(rows_list, dtype=np.int64)
    return groups, offsets


@dataclass(frozen=True, slots=True)
class _Group:
    """What every path decoding one writer schema's rows reads: who wrote, as what.

    Attributes:
        reader: The reader schema, or None (rows are read as written).
        w: The writer schema of the group.
        plan: How writer fields map to the output columns.
        schema: The output schema.
        failures: Where the rows that do not decode are appended.
    """

    reader: _Writer | None
    w: _Writer
    plan: _Plan
    schema: pa.Schema
    failures: list[DecodeFailure]


def _decode_exact_rows(
    g: _Group, bodies: pa.BinaryArray, idx: np.ndarray, *, walked: bool = False
) -> tuple[np.ndarray, pa.RecordBatch]:
    w, plan, schema, failures = g.w, g.plan, g.schema, g.failures
    records: list[dict[str, Any]] = []
    good: list[int] = []
    refused = {} if walked else _walk_refused(w, bodies)
    for pos, body in enumerate(bodies.to_pylist()):
        if pos in refused:  # never handed to fastavro: it would read it wrong, or forever
            failures.append(DecodeFailure(int(idx[pos]), FailureKind.MALFORMED, refused[pos]))
            continue
        try:
            record = _read(w, body, plan.reader)
        except AvroDecodeError as exc:
            failures.append(DecodeFailure(int(idx[pos]), exc.kind, str(exc)))
            continue
        records.append(record)
        good.append(pos)
    invalid: dict[int, str] = {}
    try:
        columns = _columns(g, records, invalid)
    except _UNBUILDABLE:
        # A value read that its column cannot hold: the rows that hold one are malformed.
        for pos, text in _unbuildable(g, records).items():
            failures.append(DecodeFailure(int(idx[good[pos]]), FailureKind.MALFORMED, text))
            good[pos] = -1
        records = [r for r, pos in zip(records, good, strict=True) if pos >= 0]
        good = [pos for pos in good if pos >= 0]
        invalid.clear()
        columns = _columns(g, records, invalid)
    batch = pa.RecordBatch.from_arrays(columns, schema=schema)
    rows = idx[np.asarray(good, dtype=np.int64)]
    if (
        plan.reader is None
        and plan.columns == list(range(len(w.node.field_names)))
        and _avro_fast.has_tags(w.node)
        and _avro_fast.supported(w.node)
        and good
    ):
        # fastavro reads any non-zero boolean byte as true; Avro allows only 0 and 1.
        checked = bodies.take(pa.array(good, pa.int64()))
        bad = _avro_fast.noncanonical_tags(checked, columns, w.node)
        for pos in np.flatnonzero(bad).tolist():
            invalid.setdefault(pos, "")
    if invalid:
        for pos, name in sorted(invalid.items()):
            msg = (
                f"avro {w.label}: field `{name}` holds bytes that are not valid UTF-8, so "
                f"they cannot be promoted to the output schema's string"
                if name
                else f"avro {w.label}: a boolean byte other than 0 or 1, or an invalid union "
                f"branch index; the body does not match the writer schema"
            )
            failures.append(DecodeFailure(int(rows[pos]), FailureKind.MALFORMED, msg))
        keep = np.ones(len(rows), dtype=bool)
        keep[list(invalid)] = False
        batch = batch.filter(pa.array(keep))
        rows = rows[keep]
    return rows, batch


_UNBUILDABLE = (pa.ArrowException, OverflowError, ValueError, TypeError)
"""What building a column raises for a value its type cannot hold."""


def _columns(g: _Group, records: list[dict[str, Any]], invalid: dict[int, str]) -> list[pa.Array]:
    """The output columns of ``records``; bytes that cannot become a string go to ``invalid``."""
    reader, w, plan, schema = g.reader, g.w, g.plan, g.schema
    source = reader.node if reader is not None else w.node
    src_children = dict(zip(source.field_names, source.children, strict=False))
    columns = []
    for f, col in zip(
        schema, plan.columns if plan.reader is None else range(len(schema)), strict=False
    ):
        if col is None:
            columns.append(pa.nulls(len(records), f.type))
            continue
        node = src_children.get(f.name)
        values = [r[f.name] for r in records]
        column = node.build(values) if node is not None else pa.array(values, f.type)
        if column.type != f.type:
            column = _promote(column, f, values, invalid)
        columns.append(column)
    return columns


def _unbuildable(g: _Group, records: list[dict[str, Any]]) -> dict[int, str]:
    """The records holding a value their column cannot hold, with the field and why.

    Only reached when a column of the whole group failed to build (the walk refuses
    such bodies first, so this is the last line, not the usual path): each record's
    values are built alone to find them.
    """
    reader, w = g.reader, g.w
    source = reader.node if reader is not None else w.node
    out: dict[int, str] = {}
    for name, node in zip(source.field_names, source.children, strict=False):
        for pos, record in enumerate(records):
            if pos in out or name not in record:
                continue
            try:
                node.build([record[name]])
            except _UNBUILDABLE as exc:
                out[pos] = (
                    f"avro {w.label}: field `{name}` holds a value its type {node.arrow} "
                    f"cannot hold ({type(exc).__name__}: {exc}); the body does not match "
                    f"the writer schema"
                )
    return out


_FASTAVRO_READS = (1, 2, 3, 10, 13)
"""Walk statuses fastavro reports itself, bounded and in its own words, where every
item of every array takes a byte: truncated, a varint cut short, bytes left over, a
negative length, a block count beyond the bytes left (fastavro runs out of them)."""


def _walk_refused(w: _Writer, bodies: pa.BinaryArray) -> dict[int, str]:
    """The rows fastavro must not read, with their reject texts.

    fastavro has no bound on a block of items that take no byte (2**62 empty records
    loop for ever), reads an ``int`` of any size, a boolean byte of 2 as true, a union
    branch or enum index of -1 as the last one, and a time of -1 as a time of day: the
    walk (native, else in Python; any valid layout) finds them first, so such a body
    never reaches fastavro. The statuses fastavro reports itself keep its text, except
    in a schema with an array of items that may take no byte: there every refused body
    is a reject.
    """
    walked = _avro_walk.walk_any(w.node, bodies)
    if walked is None and _avro_fast.empty_items(w.node):
        text = (
            f"avro {w.label}: the schema nests deeper than {_avro_walk.MAX_DEPTH} levels and "
            f"holds an array of items that may take no byte, which no bounded reader reads; "
            f"the body is not read"
        )
        return dict.fromkeys(range(len(bodies)), text)
    if walked is None or not walked.bad:
        return {}
    if _avro_fast.empty_items(w.node):
        # fastavro ignores a block's byte size and reads its count of items that take
        # no byte one by one: any body the walk refuses might never end there
        rows = np.flatnonzero(walked.status)
    else:
        rows = np.flatnonzero((walked.status != 0) & ~np.isin(walked.status, _FASTAVRO_READS))
    if not len(rows):
        return {}
    sizes = pc.binary_length(bodies).to_numpy(zero_copy_only=False)[rows].tolist()
    names = _avro_walk.labels(w.node)
    out: dict[int, str] = {}
    for pos, status, at, op, size in zip(
        rows.tolist(),
        walked.status[rows].tolist(),
        walked.where[rows].tolist(),
        walked.op[rows].tolist(),
        sizes,
        strict=True,
    ):
        if status == _avro_walk.INT_RANGE:
            what = "an `int` holds a value outside 32 bits"
        elif status in (_avro_walk.RANGE, _avro_walk.PRECISION) and op in names:
            what = f"field {names[op]} holds {_avro_walk.REASONS[status]}"
        else:
            what = _avro_walk.REASONS[status]
        out[pos] = (
            f"avro {w.label}: {what} at byte {at} of {size}; the body does not match the "
            f"writer schema"
        )
    return out


def _structural_failures(
    label: str, idx: np.ndarray, status: np.ndarray, read: np.ndarray, bodies: pa.BinaryArray
) -> list[DecodeFailure]:
    """The failures of the rows :func:`_avro_scan.scan` proved bad, as ``_read`` words them.

    One text per row is unavoidable (each names its body's length); the rows are picked
    and their numbers read columnar, and nothing is raised per row.
    """
    bad = np.flatnonzero(
        (status == _avro_scan.TRUNCATED)
        | (status == _avro_scan.CUT_VARINT)
        | (status == _avro_scan.LEFTOVER)
    )
    if not len(bad):
        return []
    sizes = pc.binary_length(bodies).to_numpy(zero_copy_only=False)[bad].tolist()
    kinds = status[bad].tolist()
    reads = read[bad].tolist()
    rows = idx[bad].tolist()
    texts = []
    for kind, size, at in zip(kinds, sizes, reads, strict=True):
        if kind in (_avro_scan.TRUNCATED, _avro_scan.CUT_VARINT):  # ends inside a record
            texts.append(_truncated_text(label, size))
        else:
            texts.append(_leftover_text(label, at, size))
    return list(map(DecodeFailure, rows, repeat(FailureKind.MALFORMED), texts))


def _promote(column: pa.Array, f: pa.Field, values: list[Any], invalid: dict[int, str]) -> pa.Array:
    """Apply an Avro type promotion (writer type -> output type) to one top-level column.

    int/long -> float/double is a conversion, as the Avro specification defines it:
    integers beyond 2**24 (float) or 2**53 (double) round to the nearest representable
    value. bytes -> string needs valid UTF-8: a row holding anything else is recorded
    in ``invalid`` (row position -> field name) and dropped by the caller as malformed.
    """
    src, target = column.type, f.type
    if pa.types.is_integer(src) and pa.types.is_floating(target):
        return column.cast(target, safe=False)
    if pa.types.is_binary(src) and pa.types.is_string(target):
        clean: list[Any] = list(values)
        for pos, v in enumerate(values):
            if v is not None:
                try:
                    v.decode("utf-8")
                except UnicodeDecodeError:
                    invalid.setdefault(pos, f.name)
                    clean[pos] = None  # the row is dropped as malformed
        return pa.array(clean, pa.binary()).cast(target)
    return _avro_fast.cast_exact(column, target)


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    # pa.nulls of length 0 builds every type; from_pylist cannot build a dense union.
    return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)


def _project(batch: pa.RecordBatch, plan: _Plan, schema: pa.Schema) -> pa.RecordBatch:
    cols = [
        _avro_fast.cast_exact(batch.column(c), f.type)
        if c is not None
        else pa.nulls(batch.num_rows, f.type)
        for f, c in zip(schema, plan.columns, strict=False)
    ]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _assemble(
    parts: list[tuple[np.ndarray, pa.RecordBatch]], schema: pa.Schema, n: int
) -> pa.RecordBatch:
    parts = [(i, b) for i, b in parts if len(i)]
    if not parts:
        return _empty(schema)
    if len(parts) == 1:
        idx, batch = parts[0]
        if len(idx) < 2 or bool(np.all(np.diff(idx) > 0)):
            return batch
    order = np.concatenate([i for i, _ in parts])
    table = pa.Table.from_batches([b for _, b in parts], schema=schema).combine_chunks()
    perm = np.argsort(order, kind="stable")
    return table.take(pa.array(perm, pa.int64())).to_batches(max_chunksize=n)[0]
