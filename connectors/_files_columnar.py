"""Private to :mod:`thalweg_bytewax.connectors.files`: Parquet, Arrow IPC and CSV readers.

Each reads columnar with pyarrow's own readers, one piece at a time (a Parquet row
group, an IPC record batch, a CSV block), so memory stays bounded by the piece.
Resume skips whole pieces by their row counts where the format records them (Parquet
row groups, IPC batches); CSV blocks before the resume row are parsed and dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ._files_common import Bad, Chunk, Target, cast_rows, chunk_of, whole_file_bad

__all__ = ["read_csv", "read_ipc", "read_parquet"]

logger = logging.getLogger(__name__)

# pyarrow's streaming CSV reader parses one block at a time; 4 MiB blocks measured
# fastest here against `pyarrow.csv.read_csv` (docs/benchmarks.md "Files").
CSV_BLOCK_BYTES = 4 << 20


def _typed(batch: pa.RecordBatch, schema: pa.Schema | None, first: int, start: int) -> Chunk:
    chunk = chunk_of(batch, first, start)
    if schema is None or chunk.rows is None:
        return chunk
    rows, offsets, bad = cast_rows(chunk.rows, schema, 0, chunk.offsets)
    return Chunk(rows, offsets, chunk.next_row, None, bad)


def read_parquet(
    target: Target, start: int, schema: pa.Schema | None, batch_rows: int
) -> Iterator[Chunk]:
    """Parquet, row group by row group; row groups before ``start`` are never read."""
    try:
        f = pq.ParquetFile(target.source())
    except (OSError, pa.ArrowException) as exc:
        yield whole_file_bad(start, "cannot read the Parquet footer", exc)
        return
    meta = f.metadata
    columns = None
    if schema is not None:
        have = set(f.schema_arrow.names)
        columns = [n for n in schema.names if n in have]
    first = 0
    for rg in range(meta.num_row_groups):
        n = meta.row_group(rg).num_rows
        if first + n <= start:
            first += n
            continue
        done = first
        try:
            for batch in f.iter_batches(batch_size=batch_rows, row_groups=[rg], columns=columns):
                yield _typed(batch, schema, done, start)
                done += batch.num_rows
        except (OSError, pa.ArrowException) as exc:
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            msg = f"row group {rg} unreadable from row {done} ({first + n - done} rows): {text}"
            yield Chunk(None, np.zeros(0, np.int64), first + n, bad=[Bad(max(done, start), msg)])
        first += n


def read_ipc(
    target: Target, start: int, schema: pa.Schema | None, batch_rows: int
) -> Iterator[Chunk]:
    """Arrow IPC (file or stream format), record batch by record batch."""
    try:
        src = target.source()
        try:
            reader = ipc.open_file(src)
            batches: Iterator[pa.RecordBatch] = (
                reader.get_batch(i) for i in range(reader.num_record_batches)
            )
        except pa.ArrowInvalid:
            batches = iter(ipc.open_stream(target.open()))
    except (OSError, pa.ArrowException) as exc:
        yield whole_file_bad(start, "cannot open the Arrow IPC file", exc)
        return
    first = 0
    try:
        for batch in batches:
            n = batch.num_rows
            if first + n > start:
                for i in range(0, n, batch_rows):
                    yield _typed(batch.slice(i, batch_rows), schema, first + i, start)
            first += n
    except (OSError, pa.ArrowException) as exc:
        yield whole_file_bad(max(first, start), f"Arrow IPC unreadable from row {first}", exc)


class _Ragged:
    """Collects the rows pyarrow's CSV parser refuses (wrong number of columns)."""

    def __init__(self) -> None:
        self.rows: list[Bad] = []

    def __call__(self, row: pacsv.InvalidRow) -> str:
        # `number` is the 1-based line number; line 1 is the header.
        index = row.number - 2 if row.number is not None and row.number > 0 else -1
        msg = (
            f"CSV row has {row.actual_columns} column(s); expected {row.expected_columns}"
            + (f" (line {row.number})" if row.number else "")
        )
        self.rows.append(Bad(index, msg, row.text.encode("utf-8", "surrogateescape")))
        return "skip"


def _positions(first: int, k: int, rejected: np.ndarray) -> np.ndarray:
    """The row indices of ``k`` good rows from ``first`` on, around rejected ones."""
    ahead = rejected[rejected >= first]
    cand = np.arange(first, first + k + len(ahead), dtype=np.int64)
    if len(ahead):
        cand = cand[~np.isin(cand, ahead)]
    return cand[:k]


def read_csv(
    target: Target, start: int, schema: pa.Schema | None, batch_rows: int
) -> Iterator[Chunk]:
    """CSV with a header row, block by block, typed by ``schema`` when given.

    A ragged row (too many or too few fields) goes to the DLQ with its text. A value
    that does not parse as its column's type fails the typed read of its block: the
    rest of the file is then read as text and cast, and only the rows that do not
    cast are rejected.
    """
    ragged = _Ragged()
    next_row = 0
    typed = schema is not None
    while True:
        # An empty field is null in every column, text included (as Kafka's JSON null).
        convert = pacsv.ConvertOptions(strings_can_be_null=True)
        if schema is not None:
            types = {f.name: f.type if typed else pa.string() for f in schema}
            convert = pacsv.ConvertOptions(
                column_types=types, include_columns=schema.names, strings_can_be_null=True
            )
        skip = next_row
        try:
            reader = pacsv.open_csv(
                target.source(),
                # Serial parsing: only then does a ragged row report its line number,
                # which places it (and the rows around it) at their row index.
                read_options=pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES, use_threads=False),
                parse_options=pacsv.ParseOptions(invalid_row_handler=ragged),
                convert_options=convert,
            )
        except pa.ArrowInvalid as exc:
            if typed:
                typed = False  # a value of the first block is not of its type
                ragged = _Ragged()
                continue
            yield whole_file_bad(max(next_row, start), "cannot read the CSV header", exc)
            return
        except (OSError, pa.ArrowException) as exc:
            yield whole_file_bad(max(next_row, start), "cannot read the CSV header", exc)
            return
        if schema is None:
            logger.warning(
                "file source: `%s` CSV schema inferred from its first block (pass a "
                "contract or an Arrow schema to fix it): %s",
                target.path,
                reader.schema.to_string(show_schema_metadata=False).replace("\n", "; "),
            )
        seen = 0
        try:
            for batch in reader:
                rejected = np.fromiter((b.row for b in ragged.rows), np.int64, len(ragged.rows))
                offsets = _positions(seen, batch.num_rows, rejected)
                seen = int(offsets[-1]) + 1 if len(offsets) else seen
                keep = offsets >= max(start, skip)
                # Rejects of blocks parsed ahead wait until the rows around them come.
                bad = [b for b in ragged.rows if max(start, skip, next_row) <= b.row < seen]
                if not keep.all():
                    batch = batch.filter(pa.array(keep))  # noqa: PLW2901 - the kept rows
                    offsets = offsets[keep]
                if schema is not None and batch.num_rows:
                    rows, offsets, cast_bad = cast_rows(batch, schema, 0, offsets)
                    bad += cast_bad
                else:
                    rows = batch if batch.num_rows else None
                next_row = max(next_row, seen)
                yield Chunk(rows, offsets, max(next_row, start), None, bad)
            tail = [b for b in ragged.rows if b.row >= max(start, skip, next_row)]
            if tail:
                end = max(b.row for b in tail) + 1
                yield Chunk(None, np.zeros(0, np.int64), max(end, start), None, tail)
            return
        except pa.ArrowInvalid as exc:
            if not typed:
                yield whole_file_bad(max(next_row, start), "CSV unreadable", exc)
                return
            logger.warning(
                "file source: `%s` a CSV value does not parse as its column's type after "
                "row %s; reading the rest as text and casting row by row",
                target.path,
                next_row,
            )
            typed = False
            ragged = _Ragged()

