"""Private to :mod:`thalweg_bytewax.connectors.files`: an Excel workbook's size, checked.

python-calamine loads a sheet as one dense range, rows x columns from its first to its
last cell reference, and decompresses the parts it needs whole: one cell at
``XFD1048576`` is a 17-billion-cell range, a small zip a gigabyte of XML. So before a
workbook reaches calamine, the zip container (xlsx, xlsm, xlsb, ods) is read here with
:mod:`zipfile`, streaming:

* every part is decompressed in 1 MiB steps and counted, never held: over
  ``max_sheet_bytes`` stops the check (the declared sizes are not trusted);
* the sheet to read (xlsx, xlsm) has its cell and row references scanned as it
  streams: its used range, rows x columns, may hold ``max_cells`` at most.

A workbook that is not a zip (xls) is left to calamine, bounded by its file size only.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from typing import IO

from ._files_limits import FileLimits, over_limit

__all__ = ["check_workbook"]

_STEP = 1 << 20
_TAIL = 64  # longer than any reference: a match cut by a step is found in the next
_CELL = re.compile(rb"<(?:\w+:)?c[\s/>]")
_CELL_REF = re.compile(rb'\sr="([A-Z]{1,8})([0-9]{1,12})"')
_ROW = re.compile(rb"<(?:\w+:)?row[\s/>]")
_ROW_REF = re.compile(rb'<(?:\w+:)?row\s+r="([0-9]{1,12})"')
_SHEET = re.compile(rb"<(?:\w+:)?sheet\s[^>]*>")
_ATTR = re.compile(rb'([\w:]+)="([^"]*)"')
_REL = re.compile(rb"<(?:\w+:)?Relationship\s[^>]*>")


class _Box:
    """The used range of a sheet as its references and elements bound it."""

    def __init__(self) -> None:
        self.max_col = 0
        self.max_row = 0
        self.cells = 0
        self.rows = 0
        self.refs = 0

    def scan(self, text: bytes, skip: int) -> None:
        """Take in ``text``; matches ending in its first ``skip`` bytes are counted."""
        for m in _CELL_REF.finditer(text):
            self.max_col = max(self.max_col, _column(m.group(1)))
            self.max_row = max(self.max_row, int(m.group(2)))
            self.refs += m.end() > skip
        for m in _ROW_REF.finditer(text):
            self.max_row = max(self.max_row, int(m.group(1)))
        self.cells += sum(m.end() > skip for m in _CELL.finditer(text))
        self.rows += sum(m.end() > skip for m in _ROW.finditer(text))

    def area(self) -> int:
        """Rows x columns calamine's range may span (cells without references count)."""
        cols = self.max_col if self.cells <= self.refs else max(self.max_col, self.cells)
        return max(self.max_row, self.rows) * cols


def _column(letters: bytes) -> int:
    n = 0
    for c in letters:
        n = n * 26 + c - 64
    return n


def _read(z: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int, box: _Box | None) -> bytes:
    """Stream one part, counting it; its text if small (``workbook.xml``), else ``b""``."""
    total = 0
    tail = b""
    small = bytearray()
    with z.open(info) as part:
        while step := part.read(_STEP):
            total += len(step)
            if total > cap:
                what = f"part `{info.filename}` decompresses past {cap:,} bytes"
                raise _Over(over_limit("max_sheet_bytes", cap, what))
            if box is not None:
                box.scan(tail + step, len(tail))
                tail = step[-_TAIL:]
            if len(small) < _STEP:
                small += step
    return bytes(small)


class _Over(Exception):
    """A bound exceeded; the message says which."""


def _sheet_part(z: zipfile.ZipFile, sheet: str | int, names: set[str], cap: int) -> str | None:
    """The zip path of the sheet calamine will read (xlsx, xlsm), or ``None``."""
    if "xl/workbook.xml" not in names or "xl/_rels/workbook.xml.rels" not in names:
        return None
    book = _read(z, z.getinfo("xl/workbook.xml"), cap, None)
    rels = _read(z, z.getinfo("xl/_rels/workbook.xml.rels"), cap, None)
    sheets = [dict(_ATTR.findall(m.group(0))) for m in _SHEET.finditer(book)]
    if isinstance(sheet, int):
        chosen = sheets[sheet] if -len(sheets) <= sheet < len(sheets) else None
    else:
        chosen = next((s for s in sheets if s.get(b"name", b"").decode() == sheet), None)
    if chosen is None:
        return None  # calamine names the missing sheet
    rid = next((v for k, v in chosen.items() if k.endswith(b":id")), None)
    for m in _REL.finditer(rels):
        attrs = dict(_ATTR.findall(m.group(0)))
        if attrs.get(b"Id") == rid:
            target = attrs.get(b"Target", b"").decode()
            return target.lstrip("/") if target.startswith("/") else f"xl/{target}"
    return None


def check_workbook(f: IO[bytes], sheet: str | int, limits: FileLimits) -> str | None:
    """Why the workbook in ``f`` must not reach calamine, or ``None`` (``f`` rewound).

    Args:
        f: The workbook file, seekable.
        sheet: The sheet to read, by index or name.
        limits: The bounds: ``max_sheet_bytes`` for every part, ``max_cells`` for the
            sheet's used range.

    Returns:
        The bound exceeded (its code first) or why the zip cannot be measured, or
        ``None`` when the workbook is in bounds or is no zip (xls: calamine judges it).
    """
    if not zipfile.is_zipfile(f):
        f.seek(0)
        return None
    try:
        f.seek(0)
        with zipfile.ZipFile(f) as z:
            infos = z.infolist()
            names = {i.filename for i in infos}
            part = _sheet_part(z, sheet, names, limits.max_sheet_bytes)
            box = _Box()
            for info in infos:
                _read(z, info, limits.max_sheet_bytes, box if info.filename == part else None)
        if box.area() > limits.max_cells:
            what = (
                f"sheet `{part}` spans {max(box.max_row, box.rows):,} row(s) x "
                f"{box.area() // max(1, box.max_row, box.rows):,} column(s) "
                f"({box.area():,} cells) by its cell references"
            )
            return over_limit("max_cells", limits.max_cells, what)
        return None
    except _Over as exc:
        return str(exc)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError,
            RuntimeError, NotImplementedError, zlib.error) as exc:
        # Its parts cannot be measured, so they are not handed on to be decompressed.
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"the workbook is a zip whose parts cannot be read ({text})"
    finally:
        f.seek(0)
