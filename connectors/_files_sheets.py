"""Private to :mod:`thalweg_bytewax.connectors.files`: Excel sheets and XML records.

Both formats are read row by row by their parsers (python-calamine, lxml), so values
reach Arrow through Python lists, one window of rows at a time; the window is then
cast to the schema columnar, and only on a failed cast row by row.

* Excel: one sheet (``sheet=``, default the first); its first row is the header. A
  header with empty or merged cells cannot name the columns: the sheet goes to the DLQ
  with the merged ranges named.
* XML: ``record_path`` (``"/orders/order"``) names the record elements; each record's
  child elements (and its attributes, as ``@name``) are its fields, as text, cast to
  the schema. Parsing is streaming (``lxml.etree.iterparse``) and each record element
  is cleared once read. Malformed XML sends the rest of the file, from the first
  record not read, to the DLQ with the parser's message and line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from thalweg_bytewax._deps import require

from ._files_common import Bad, Chunk, Target, cast_rows, chunk_of, whole_file_bad
from ._files_limits import DEFAULT_LIMITS, FileLimits
from ._files_workbook import check_workbook

__all__ = ["read_excel", "read_xml"]


def _window(
    names: list[str], rows: list[list[Any]], first: int, start: int, schema: pa.Schema | None
) -> Chunk:
    columns: list[pa.Array] = []
    for j in range(len(names)):
        values = [r[j] if j < len(r) else None for r in rows]
        values = [None if v == "" else v for v in values]
        try:
            columns.append(pa.array(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            columns.append(pa.array([None if v is None else str(v) for v in values], pa.string()))
    batch = pa.RecordBatch.from_arrays(columns, names=names)
    chunk = chunk_of(batch, first, start)
    if schema is None or chunk.rows is None:
        return chunk
    good, offsets, bad = cast_rows(chunk.rows, schema, 0, chunk.offsets)
    return Chunk(good, offsets, chunk.next_row, None, bad)


def read_excel(
    target: Target,
    start: int,
    schema: pa.Schema | None,
    batch_rows: int,
    sheet: str | int = 0,
    limits: FileLimits = DEFAULT_LIMITS,
) -> Iterator[Chunk]:
    """One sheet of an Excel workbook (xlsx, xlsm, xls, xlsb, ods) by windows of rows.

    The workbook's parts and the sheet's used range are checked against ``limits``
    first (:func:`check_workbook`): a workbook over them is one DLQ row, unloaded.
    """
    calamine = require("python_calamine", extra="files")
    try:
        with target.open() as f:
            over = check_workbook(f, sheet, limits)
            if over is not None:
                bad = Bad(start, f"Excel workbook not loaded: {over}")
                yield Chunk(None, np.zeros(0, np.int64), start, bad=[bad])
                return
            book = calamine.CalamineWorkbook.from_filelike(f)
            ws = (
                book.get_sheet_by_index(sheet)
                if isinstance(sheet, int)
                else book.get_sheet_by_name(sheet)
            )
            merged = ws.merged_cell_ranges or []
            rows_iter = iter(ws.iter_rows())
            header = next(rows_iter, None)
            if header is None:
                return
            blanks = [j for j, v in enumerate(header) if v in ("", None)]
            in_header = [m for m in merged if m[0][0] == 0]
            if blanks or in_header:
                ranges = ", ".join(f"{m[0]}-{m[1]}" for m in in_header) or "none"
                msg = (
                    f"Excel sheet `{ws.name}`: expected a header row naming every column; "
                    f"got empty header cell(s) at column(s) {blanks} (merged ranges in "
                    f"the header: {ranges}); unmerge the header cells"
                )
                yield Chunk(None, np.zeros(0, np.int64), start, bad=[Bad(start, msg)])
                return
            names = [str(v) for v in header]
            first = 0
            window: list[list[Any]] = []
            for row in rows_iter:
                window.append(row)
                if len(window) == batch_rows:
                    if first + batch_rows > start:
                        yield _window(names, window, first, start, schema)
                    first += batch_rows
                    window = []
            if window:
                yield _window(names, window, first, start, schema)
    except (OSError, ValueError, IndexError) as exc:
        yield whole_file_bad(start, "cannot read the Excel workbook", exc)
    except Exception as exc:  # calamine raises its own types (CalamineError, ...)
        if type(exc).__module__.startswith("python_calamine"):
            yield whole_file_bad(start, "cannot read the Excel workbook", exc)
        else:
            raise


def _record(elem: Any) -> dict[str, str | None]:
    out: dict[str, str | None] = {f"@{k}": v for k, v in elem.attrib.items()}
    for child in elem:
        if isinstance(child.tag, str):
            tag = child.tag.rsplit("}", 1)[-1]
            out[tag] = child.text
    return out


def _xml_window(
    rows: list[dict[str, str | None]], first: int, start: int, schema: pa.Schema | None
) -> Chunk:
    names = list(schema.names) if schema is not None else list(dict.fromkeys(
        k for r in rows for k in r
    ))
    batch = pa.RecordBatch.from_arrays(
        [pa.array([r.get(n) for r in rows], pa.string()) for n in names], names=names
    )
    chunk = chunk_of(batch, first, start)
    if schema is None or chunk.rows is None:
        return chunk
    good, offsets, bad = cast_rows(chunk.rows, schema, 0, chunk.offsets)
    return Chunk(good, offsets, chunk.next_row, None, bad)


def read_xml(
    target: Target,
    start: int,
    schema: pa.Schema | None,
    batch_rows: int,
    record_path: str = "",
) -> Iterator[Chunk]:
    """The record elements at ``record_path``, streamed, by windows of rows."""
    etree = require("lxml.etree", extra="files")
    steps = [s for s in record_path.split("/") if s]
    first = 0
    window: list[dict[str, str | None]] = []
    with target.open() as f:
        try:
            for _, elem in etree.iterparse(f, events=("end",), tag=steps[-1], huge_tree=False):
                path = [a.tag for a in reversed(list(elem.iterancestors()))] + [elem.tag]
                if path != steps:
                    continue
                window.append(_record(elem))
                elem.clear()
                parent = elem.getparent()
                while elem.getprevious() is not None and parent is not None:
                    del parent[0]
                if len(window) == batch_rows:
                    if first + batch_rows > start:
                        yield _xml_window(window, first, start, schema)
                    first += batch_rows
                    window = []
        except etree.XMLSyntaxError as exc:
            if window:
                yield _xml_window(window, first, start, schema)
                first += len(window)
            msg = (
                f"malformed XML after record {first - 1} (line {exc.lineno}): {exc.msg}; "
                "the rest of the file is not read"
            )
            yield Chunk(None, np.zeros(0, np.int64), max(first, start),
                        bad=[Bad(max(first, start), msg)])
            return
    if window:
        yield _xml_window(window, first, start, schema)
