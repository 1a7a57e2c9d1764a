"""The columnar paths of :class:`~thalweg_bytewax.codecs.json.JsonCodec`.

The native reader parses a batch in one pass and sets aside every row it cannot decode
exactly; ``pyarrow.json`` reads the rest (or every row, without the native reader), and
a block it fails on is bisected to pinpoint the bad rows. Rows neither path decides
exactly go record by record through the same ``orjson`` conversion as ``decode_value``.
Private to :mod:`thalweg_bytewax.codecs.json`; the codec mixes :class:`ColumnarPaths` in.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from itertools import repeat
from typing import Any, Protocol, TypeAlias

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from thalweg_bytewax.codecs._json_arrow import RowScan, _braced, _flag_rows, _retype, _violations
from thalweg_bytewax.codecs._json_fast import DEFERRED, READ, NativeReader, syntax_texts
from thalweg_bytewax.codecs._json_values import Converter, JsonDecodeError
from thalweg_bytewax.codecs.base import DecodeFailure, FailureKind
from thalweg_bytewax.errors import ThalwegError

__all__ = ["ColumnarPaths", "inferred_schema"]

# One block for a whole batch: pyarrow.json splits on block boundaries, and a single
# block keeps row order trivially; batches are bounded by the source's byte budget.
_MIN_BLOCK = 1 << 20


_Blocks: TypeAlias = tuple[list[pa.RecordBatch], list[DecodeFailure]]
"""Decoded batches and the failures of the rows they lack."""


def _in_halves(
    read: Callable[[np.ndarray, pa.Array], _Blocks], rows: np.ndarray, bodies: pa.Array
) -> _Blocks:
    """Rows ``rows`` (their ``bodies``) read in two halves by ``read``.

    A block a reader failed on as a whole is bisected this way until the rows that fail
    it are alone.
    """
    mid = len(rows) // 2
    left, lerr = read(rows[:mid], bodies.slice(0, mid))
    right, rerr = read(rows[mid:], bodies.slice(mid))
    return left + right, lerr + rerr


def _as_declared(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` (of ``schema``'s layout) with ``schema``'s stricter nested nullability."""
    cols = [_retype(c, f.type) for c, f in zip(batch.columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


class _Codec(Protocol):
    """What the columnar paths read of the codec they are mixed into."""

    _reader: NativeReader | None
    _scan: RowScan
    _reserved: list[str]
    _columnar: bool
    _convert: Converter
    _cast: pa.Schema
    _parsed: pa.Schema
    _parse: pj.ParseOptions

    @property
    def arrow_schema(self) -> pa.Schema: ...

    def _doc(self, body: bytes) -> dict[str, Any]: ...

    def _native_blocks(self, rows: np.ndarray, bodies: pa.Array) -> _Blocks: ...

    def _set_aside(
        self, rows: np.ndarray, bodies: pa.Array, where: np.ndarray
    ) -> tuple[pa.RecordBatch | None, np.ndarray, list[DecodeFailure]]: ...

    def _read(self, bodies: pa.Array) -> tuple[pa.RecordBatch, np.ndarray]: ...

    def _blocks(self, rows: np.ndarray, bodies: pa.Array) -> _Blocks: ...

    def _per_record(self, rows: np.ndarray, bodies: pa.Array) -> _Blocks: ...

    def _failure(self, body: bytes, arrow_text: str | None = None) -> tuple[FailureKind, str]: ...


class ColumnarPaths:
    """The native-reader and ``pyarrow.json`` paths of ``decode_batch``."""

    def _native_blocks(self: _Codec, rows: np.ndarray, bodies: pa.Array) -> _Blocks:
        """Rows ``rows`` (their ``bodies``) through the native reader."""
        if not len(rows):
            return [], []
        assert self._reader is not None
        try:
            native, status, where = self._reader.read(bodies)
            table = pa.Table.from_batches([native]).cast(self._parsed)
            if self._parsed != self._cast:  # s / ms timestamps: safe, so truncation fails
                table = table.cast(self._cast)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
            # A text that is no timestamp or decimal, or over 2 GiB in a column.
            if len(rows) == 1:
                return self._per_record(rows, bodies)
            return _in_halves(self._native_blocks, rows, bodies)
        batch = _one_batch(table, self._cast)
        at = np.flatnonzero(status == READ)
        failures = _syntax_failures(rows, status, where)
        deferred = status == DEFERRED
        if deferred.any():
            extra, extra_at, aside = self._set_aside(rows, bodies, np.flatnonzero(deferred))
            failures += aside
            if extra is not None:
                positions = np.concatenate([at, extra_at])
                order = np.argsort(positions, kind="stable")
                batch = pa.concat_batches([batch, extra]).take(pa.array(order))
                at = positions[order]
        whole = pa.StructArray.from_arrays(batch.columns, names=batch.schema.names)
        bad = _violations(whole, pa.struct(list(self.arrow_schema)))
        if bad.any():
            failures += [
                DecodeFailure(int(rows[at[j]]), *self._failure(bodies[int(at[j])].as_py()))
                for j in np.flatnonzero(bad)
            ]
            batch = batch.filter(pa.array(~bad))
        return [_as_declared(batch, self.arrow_schema)], failures

    def _set_aside(
        self: _Codec, rows: np.ndarray, bodies: pa.Array, where: np.ndarray
    ) -> tuple[pa.RecordBatch | None, np.ndarray, list[DecodeFailure]]:
        """The rows the native reader set aside, through the per-value path."""
        docs: list[dict[str, Any]] = []
        at: list[int] = []
        failures = []
        for j in where:
            try:
                doc = self._convert(self._doc(bodies[int(j)].as_py()))
                pa.RecordBatch.from_pylist([doc], schema=self._cast)  # fits the types
            except JsonDecodeError as exc:
                failures.append(DecodeFailure(int(rows[j]), exc.kind, str(exc)))
                continue
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                text = str(exc).split("\n")[0]
                failures.append(
                    DecodeFailure(
                        int(rows[j]),
                        FailureKind.SCHEMA_MISMATCH,
                        f"json document does not fit the Arrow schema: {text}",
                    )
                )
                continue
            docs.append(doc)
            at.append(int(j))
        if not docs:
            return None, np.zeros(0, np.int64), failures
        extra = pa.RecordBatch.from_pylist(docs, schema=self._cast)
        return extra, np.array(at, np.int64), failures

    def _pyarrow_batch(
        self: _Codec, body: pa.Array, good_np: np.ndarray, errors: list[DecodeFailure]
    ) -> _Blocks:
        """The ``pyarrow.json`` path: only rows that are one ``{...}`` object reach it.

        Rows flagged by ``_flag_rows`` (a newline, the reserved prefix, a possible
        ``NaN`` / ``Infinity`` literal, invalid UTF-8...) are looked at in Python first.
        """
        good_np = good_np.copy()
        special_np = _flag_rows(body, self._scan) & good_np
        fixed: dict[int, bytes] = {}
        for i in np.flatnonzero(special_np):
            raw = body[i].as_py()
            try:
                doc = self._doc(raw)
            except JsonDecodeError as exc:
                errors.append(DecodeFailure(int(i), exc.kind, str(exc)))
                good_np[i] = False
                continue
            if b"\n" in raw or b"\r" in raw or raw[:1] != b"{" or raw[-1:] != b"}":
                fixed[int(i)] = orjson.dumps(doc)  # one braced line per document
        rows = np.flatnonzero(good_np)
        if fixed:
            bodies = pa.array([fixed.get(int(i)) or body[i].as_py() for i in rows], pa.binary())
        elif len(rows) == len(body):
            bodies = body
        else:
            bodies = body.filter(pa.array(good_np))
        if self._reserved:
            errors += [DecodeFailure(int(i), *self._failure(b"{}")) for i in rows]
            rows = rows[:0]
        return self._blocks(rows, bodies)

    def _read(self: _Codec, bodies: pa.Array) -> tuple[pa.RecordBatch, np.ndarray]:
        if not _braced(bodies):
            # pyarrow.json reads a `null` document as a row of nulls, and alone it
            # crashes the process: decode_batch must have set every other row aside.
            msg = (
                "json codec: a row that is not one `{...}` object reached the columnar "
                "reader (a codec bug)"
            )
            raise ThalwegError(msg)
        lines = pc.binary_join_element_wise(bodies, pa.scalar(b""), pa.scalar(b"\n"))
        offsets = np.frombuffer(lines.buffers()[1], np.int32)[
            lines.offset : lines.offset + len(lines) + 1
        ]
        data = lines.buffers()[2][offsets[0] : offsets[-1]]
        opts = pj.ReadOptions(use_threads=False, block_size=max(_MIN_BLOCK, data.size + 1))
        table = pj.read_json(pa.BufferReader(data), read_options=opts, parse_options=self._parse)
        if table.num_rows != len(bodies):
            msg = f"expected {len(bodies)} documents; got {table.num_rows}"
            raise pa.ArrowInvalid(msg)
        table = table.cast(self._parsed)
        if self._parsed != self._cast:  # s / ms timestamps: safe, so truncation fails
            table = table.cast(self._cast)
        if table.num_rows == 0:
            return pa.RecordBatch.from_pylist([], schema=self._cast), np.zeros(0, np.bool_)
        batch = table.combine_chunks().to_batches()[0]
        whole = pa.StructArray.from_arrays(batch.columns, names=batch.schema.names)
        return batch, _violations(whole, pa.struct(list(self.arrow_schema)))

    def _blocks(self: _Codec, rows: np.ndarray, bodies: pa.Array) -> _Blocks:
        if not len(rows):
            return [], []
        if not self._columnar:
            return self._per_record(rows, bodies)
        try:
            batch, bad = self._read(bodies)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            if len(rows) == 1:
                # The per-value path decides: the row's failure, or its value where
                # read_json is stricter (a repeated key: orjson keeps the last one).
                return self._per_record(rows, bodies)
            return _in_halves(self._blocks, rows, bodies)
        failures = []
        if bad.any():
            failures = [
                DecodeFailure(int(rows[j]), *self._failure(bodies[int(j)].as_py()))
                for j in np.flatnonzero(bad)
            ]
            batch = batch.filter(pa.array(~bad))
        return [_as_declared(batch, self.arrow_schema)], failures

    def _per_record(self: _Codec, rows: np.ndarray, bodies: pa.Array) -> _Blocks:
        # pyarrow.json cannot read map columns: such schemas decode through orjson.
        good, failures = [], []
        for i, body in zip(rows, bodies.to_pylist(), strict=True):
            try:
                good.append(self._convert(self._doc(body)))
            except JsonDecodeError as exc:
                failures.append(DecodeFailure(int(i), exc.kind, str(exc)))
        batch = pa.RecordBatch.from_pylist(good, schema=self._cast)
        return [_as_declared(batch, self.arrow_schema)], failures

    def _failure(
        self: _Codec, body: bytes, arrow_text: str | None = None
    ) -> tuple[FailureKind, str]:
        try:
            self._convert(self._doc(body))
        except JsonDecodeError as exc:
            return exc.kind, str(exc)
        detail = (arrow_text or "rejected by the columnar reader").split("\n")[0]
        return FailureKind.SCHEMA_MISMATCH, f"json document does not match the schema: {detail}"


def inferred_schema(docs: list[dict[str, Any]]) -> pa.Schema:
    """The schema ``pyarrow.json`` infers for ``docs``, read as one block."""
    # One orjson line per object: read_json only ever sees `{...}` documents, and in
    # one block, whatever the size of a document.
    sample = b"\n".join(orjson.dumps(d) for d in docs) or b"{}"
    opts = pj.ReadOptions(use_threads=False, block_size=max(_MIN_BLOCK, len(sample) + 1))
    schema: pa.Schema = pj.read_json(io.BytesIO(sample), read_options=opts).schema
    return schema


def _syntax_failures(
    rows: np.ndarray, status: np.ndarray, where: np.ndarray
) -> list[DecodeFailure]:
    """The rows the native reader rejected as no JSON, worded as the per-value path does.

    No per-row parse: the reader found the error and its position in its one pass.
    """
    bad = np.flatnonzero(status > DEFERRED)
    if not len(bad):
        return []
    texts = syntax_texts(status[bad], where[bad])
    return list(map(DecodeFailure, rows[bad].tolist(), repeat(FailureKind.MALFORMED), texts))


def _one_batch(table: pa.Table, schema: pa.Schema) -> pa.RecordBatch:
    """``table`` as one record batch (an empty one for no rows)."""
    if table.num_rows == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    return table.combine_chunks().to_batches()[0]
