"""Private to :mod:`thalweg_bytewax.connectors.files`: the CSV reader.

The file (decompressed as it is read when its name ends in ``.gz`` and the like) is cut
into blocks of :data:`CSV_BLOCK_BYTES` at line ends; each block goes through
``pyarrow.csv.read_csv`` on every core (the same parser the whole-file reader uses).
What goes wrong stays inside its block:

* a ragged row (too many or too few fields) makes only its block be parsed again,
  serially: pyarrow's serial parser numbers the rows it refuses, which places each
  ragged row (and the rows around it) at its row index;
* a value that does not parse as its column's type makes only its block be parsed
  again as text and cast: the rows that do not cast are rejected, the others kept;
* a block that does not even read as text has its lines checked for UTF-8 (columnar,
  over the block's buffer: :mod:`._csv_lines`): each line that is not UTF-8 is one DLQ
  row with its bytes and row index, and the block's other lines are parsed again
  without them; a block unreadable for another reason is one DLQ row at its first row.
  The next block goes on.

A row's index is its 0-based data row: blank lines are not rows, ragged ones are. Rows
come out in batches of at most ``batch_rows``; a resume skips whole blocks before the
resume row by counting their lines, without parsing them. Like pyarrow's own default
(``newlines_in_values=False``), a quoted value may not hold a line break.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ._common import Bad, Chunk, ReadOptions, Target, cast_rows, rest_bad, whole_file_bad
from ._csv_lines import BlockLines, count_rows, not_utf8_message
from ._limits import LimitExceeded, LongLine
from ._lines import Block, first_newline, line_blocks, long_line_message, open_lines

__all__ = ["CSV_BLOCK_BYTES", "read_csv"]

logger = logging.getLogger(__name__)

CSV_BLOCK_BYTES = 8 << 20
"""Bytes per block handed to ``read_csv``: also what a bad row re-parses at most."""

# pyarrow's own block inside one of ours: 1 MiB (its default) spreads a block over the
# cores.
_PARSE_BLOCK_BYTES = 1 << 20


class _Ragged:
    """Collects the rows pyarrow's CSV parser refuses (wrong number of columns)."""

    def __init__(self) -> None:
        self.rows: list[pacsv.InvalidRow] = []

    def __call__(self, row: pacsv.InvalidRow) -> str:
        self.rows.append(row)
        return "skip"


def _header(block: Block) -> tuple[list[str], Block]:
    """The column names of a file's first line, and the rest of its first block."""
    whole = block if isinstance(block, pa.Buffer) else pa.py_buffer(block)
    cut = first_newline(memoryview(whole).cast("B"))
    line, rest = (whole, b"") if cut < 0 else (whole.slice(0, cut + 1), whole.slice(cut + 1))
    opts = pacsv.ReadOptions(block_size=max(_PARSE_BLOCK_BYTES, len(line) + 1))
    names: list[str] = pacsv.read_csv(pa.py_buffer(line), read_options=opts).column_names
    return names, rest


def _parse(
    block: Block, names: list[str], convert: pacsv.ConvertOptions, *, threads: bool
) -> tuple[pa.Table, list[pacsv.InvalidRow]]:
    try:
        return _parse_in(block, names, convert, threads=threads, size=_PARSE_BLOCK_BYTES)
    except pa.ArrowInvalid as exc:
        if "straddling" not in str(exc):
            raise
    # A line longer than pyarrow's block (within `max_line_bytes`): the block in one.
    return _parse_in(block, names, convert, threads=threads, size=len(block) + 1)


def _parse_in(
    block: Block, names: list[str], convert: pacsv.ConvertOptions, *, threads: bool, size: int
) -> tuple[pa.Table, list[pacsv.InvalidRow]]:
    ragged = _Ragged()
    table = pacsv.read_csv(
        pa.py_buffer(block),
        read_options=pacsv.ReadOptions(column_names=names, use_threads=threads, block_size=size),
        parse_options=pacsv.ParseOptions(invalid_row_handler=ragged),
        convert_options=convert,
    )
    return table, ragged.rows


@dataclass(eq=False)
class _Block:
    """One block parsed: good rows (typed, or text to cast), their row indices, rejects."""

    table: pa.Table
    offsets: np.ndarray
    bad: list[Bad]
    text: bool
    rows: int
    """The rows of the block: good, ragged and unreadable."""


def _read_block(
    block: Block, first: int, names: list[str], typed: pacsv.ConvertOptions,
    text: pacsv.ConvertOptions,
) -> _Block:
    as_text = False
    try:
        table, ragged = _parse(block, names, typed, threads=True)
    except pa.ArrowInvalid:  # a value not of its column's type: this block as text
        as_text = True
        try:
            table, ragged = _parse(block, names, text, threads=True)
        except pa.ArrowInvalid as exc:
            lines = BlockLines(block)
            bad_lines = lines.not_utf8()
            if len(bad_lines):  # only those lines are bad: the others, parsed again
                return _without_lines(lines, bad_lines, first, names, typed, text)
            rows = count_rows(block)
            cause = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            msg = f"CSV block of {rows} row(s) from row {first} unreadable as text: {cause}"
            return _Block(_empty(names, text), np.zeros(0, np.int64), [Bad(first, msg)], True, rows)
    if ragged:  # only a serial parse numbers them: this block again, serially
        table, ragged = _parse(block, names, text if as_text else typed, threads=False)
    bad: list[Bad] = []
    at = np.zeros(len(ragged), np.int64)
    for i, row in enumerate(ragged):
        # `number` is 1-based among the block's non-blank lines, i.e. its rows.
        at[i] = first + row.number - 1
        msg = (
            f"CSV row has {row.actual_columns} column(s); expected {row.expected_columns}"
        )
        bad.append(Bad(int(at[i]), msg, row.text.encode("utf-8", "surrogateescape")))
    every = np.arange(first, first + table.num_rows + len(ragged), dtype=np.int64)
    offsets = every[~np.isin(every, at)] if len(at) else every
    return _Block(table, offsets, bad, as_text, table.num_rows + len(ragged))


def _empty(names: list[str], text: pacsv.ConvertOptions) -> pa.Table:
    cols = list(text.include_columns) or names
    return pa.table({n: pa.array([], pa.string()) for n in cols})


def _without_lines(
    lines: BlockLines, bad_lines: np.ndarray, first: int, names: list[str],
    typed: pacsv.ConvertOptions, text: pacsv.ConvertOptions,
) -> _Block:
    """A block whose ``bad_lines`` are not UTF-8: each one DLQ row, the rest parsed.

    Each bad line keeps its row index and its bytes; the other lines, blank ones too,
    are parsed again as one block, and their rows keep the row indices they have here.
    """
    row_of = first + np.cumsum(lines.is_row) - 1  # the row index of each line
    bad = [Bad(int(row_of[i]), not_utf8_message(raw), raw)
           for i in bad_lines.tolist() for raw in [lines.raw(i)]]
    keep = np.ones(len(lines.starts), bool)
    keep[bad_lines] = False
    good_rows = row_of[keep & lines.is_row]
    if not len(good_rows):
        return _Block(_empty(names, text), np.zeros(0, np.int64), bad, True, len(bad))
    rest = lines.bytes[np.repeat(keep, np.diff(lines.bounds))].tobytes()
    parsed = _read_block(rest, 0, names, typed, text)
    bad += [Bad(int(good_rows[b.row]), b.message, b.raw) for b in parsed.bad]
    bad.sort(key=lambda b: b.row)
    offsets = good_rows[parsed.offsets]
    return _Block(parsed.table, offsets, bad, parsed.text, parsed.rows + len(bad_lines))


def read_csv(target: Target, start: int, options: ReadOptions) -> Iterator[Chunk]:
    """CSV with a header row, block by block on every core, typed by the options' ``schema``."""
    try:
        stream = open_lines(target, options.limits)
    except (OSError, pa.ArrowException) as exc:
        yield whole_file_bad(start, "cannot open the CSV file", exc)
        return
    with stream:
        yield from _read(target, stream, start, options)


def _read(target: Target, stream: Any, start: int, options: ReadOptions) -> Iterator[Chunk]:
    schema, batch_rows, limits = options.schema, options.batch_rows, options.limits
    blocks = line_blocks(stream, CSV_BLOCK_BYTES, limits.max_line_bytes)
    try:
        head = next(blocks, b"")
        if isinstance(head, LongLine):
            msg = long_line_message(head, limits.max_line_bytes)
            bad = Bad(start, f"cannot read the CSV header: {msg}", head.head)
            yield Chunk(None, np.zeros(0, np.int64), start, bad=[bad])
            return
        names, block = _header(head)
        del head  # the first read, its header cut off: only `block` is kept
    except LimitExceeded as exc:
        yield rest_bad(start, "cannot read the CSV header", exc)
        return
    except (OSError, pa.ArrowException) as exc:
        yield whole_file_bad(start, "cannot read the CSV header", exc)
        return
    if schema is not None:
        missing = [n for n in schema.names if n not in names]
        if missing:
            msg = (
                f"CSV header expected column(s) {', '.join(f'`{m}`' for m in missing)} of "
                f"the schema; got {', '.join(names)}"
            )
            yield Chunk(None, np.zeros(0, np.int64), start, bad=[Bad(start, msg)])
            return
    # An empty field is null in every column, text included (as Kafka's JSON null).
    typed = text = pacsv.ConvertOptions(strings_can_be_null=True)
    if schema is not None:
        typed = pacsv.ConvertOptions(
            column_types=schema, include_columns=schema.names, strings_can_be_null=True
        )
        text = pacsv.ConvertOptions(
            column_types={n: pa.string() for n in schema.names},
            include_columns=schema.names,
            strings_can_be_null=True,
        )
    first = 0
    block_or_line: Block | LongLine = block
    try:
        while True:
            if isinstance(block_or_line, LongLine):  # one row, too long to parse
                if first >= start:
                    msg = long_line_message(block_or_line, limits.max_line_bytes)
                    bad = Bad(first, msg, block_or_line.head)
                    yield Chunk(None, np.zeros(0, np.int64), first + 1, bad=[bad])
                first += 1
                block = b""
            else:
                block = block_or_line
            if block:
                rows = count_rows(block) if first < start else 0
                if rows and first + rows <= start:  # before the resume row: unparsed
                    first += rows
                else:
                    parsed = _read_block(block, first, names, typed, text)
                    # Parsed: the block's bytes are not held while its rows are out
                    # (a worker's files are all suspended here in turn, each would
                    # keep a block).
                    block = block_or_line = b""
                    if schema is None:
                        schema = parsed.table.schema
                        typed = pacsv.ConvertOptions(
                            column_types=schema, strings_can_be_null=True
                        )
                        logger.warning(
                            "file source: `%s` CSV schema inferred from its first block "
                            "(pass a contract or an Arrow schema to fix it): %s",
                            target.name,
                            schema.to_string(show_schema_metadata=False).replace("\n", "; "),
                        )
                    yield from _chunks(parsed, first, start, schema, batch_rows)
                    first += parsed.rows
            block_or_line = next(blocks, b"")
            if not block_or_line:
                return
    except LimitExceeded as exc:
        yield rest_bad(max(first, start), f"CSV from row {first} not read", exc)
    except (OSError, pa.ArrowException) as exc:
        yield whole_file_bad(max(first, start), f"CSV unreadable from row {first}", exc)


def _chunks(
    parsed: _Block, first: int, start: int, schema: pa.Schema, batch_rows: int
) -> Iterator[Chunk]:
    """A parsed block as chunks of ``batch_rows`` at most, each with the rejects it spans."""
    keep = parsed.offsets >= start
    table, offsets = parsed.table, parsed.offsets
    if not keep.all():
        table, offsets = table.filter(pa.array(keep)), offsets[keep]
    end = first + parsed.rows
    bad = [b for b in parsed.bad if b.row >= start]
    if not table.num_rows:
        if bad:
            yield Chunk(None, offsets, end, None, bad)
        return
    for i in range(0, table.num_rows, batch_rows):
        piece = table.slice(i, batch_rows).combine_chunks().to_batches()[0]
        offs = offsets[i : i + batch_rows]
        last = i + batch_rows >= table.num_rows
        upto = end if last else int(offsets[i + batch_rows])
        mine = [b for b in bad if b.row < upto]
        bad = [b for b in bad if b.row >= upto]
        if parsed.text or not piece.schema.equals(schema, check_metadata=False):
            rows, offs, cast_bad = cast_rows(piece, schema, 0, offs)
            mine += cast_bad
        else:
            rows = piece
        yield Chunk(rows, offs, upto, None, mine)
