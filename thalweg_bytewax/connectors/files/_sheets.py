"""Private to :mod:`thalweg_bytewax.connectors.files`: Excel sheets.

The sheet is read row by row by its parser (python-calamine), so values reach Arrow
through Python lists, one window of rows at a time; the window is then cast to the
schema columnar, and only on a failed cast row by row.

* Excel: one sheet (``sheet=``, default the first); its first row is the header. A
  header with empty or merged cells cannot name the columns: the sheet goes to the DLQ
  with the merged ranges named.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from thalweg_bytewax._deps import require

from ._common import Bad, Chunk, ReadOptions, Target, typed_chunk, whole_file_bad
from ._workbook import check_workbook

__all__ = ["read_excel"]


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
    return typed_chunk(batch, schema, first, start)


def read_excel(
    target: Target, start: int, options: ReadOptions, *, sheet: str | int = 0
) -> Iterator[Chunk]:
    """One sheet of an Excel workbook (xlsx, xlsm, xls, xlsb, ods) by windows of rows.

    The workbook's parts and the sheet's used range are checked against the options'
    ``limits`` first (:func:`check_workbook`): a workbook over them is one DLQ row,
    unloaded.
    """
    schema, batch_rows = options.schema, options.batch_rows
    calamine = require("python_calamine", extra="files")
    try:
        with target.open() as f:
            over = check_workbook(f, sheet, options.limits)
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
