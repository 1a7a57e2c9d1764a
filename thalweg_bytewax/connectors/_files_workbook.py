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

import numpy as np

from ._files_limits import FileLimits, over_limit

__all__ = ["check_workbook"]

_STEP = 1 << 20
_TAIL = 64  # longer than any reference: a match cut by a step is found in the next
_ROOT = re.compile(rb"<(\w+:)?worksheet[\s>]")
_SHEET = re.compile(rb"<(?:\w+:)?sheet\s[^>]*>")
_ATTR = re.compile(rb'([\w:]+)="([^"]*)"')
_REL = re.compile(rb"<(?:\w+:)?Relationship\s[^>]*>")


class _Box:
    """The used range of a sheet as its references and elements bound it.

    Elements are counted with ``bytes.count`` and references (``r="XFD1048576"``, on
    cells and rows) parsed columnar with numpy: a step costs a few passes in C, not a
    Python loop per cell.
    """

    def __init__(self) -> None:
        self.max_col = 0
        self.max_row = 0
        self.cells = 0
        self.refs = 0
        self.rows = 0
        self.widest = 0  # the most cells in one row, for cells without a reference
        self._open_row = 0
        self._ns = b""

    def scan(self, step: bytes, tail: bytes) -> None:
        """Take in one step of the sheet's XML; ``tail`` ends the step before it."""
        if not tail:  # the first step: the namespace prefix of the elements, if any
            root = _ROOT.search(step)
            self._ns = root.group(1) or b"" if root else b""
        text = tail + step
        col, row = _max_refs(text)
        self.max_col = max(self.max_col, col)
        self.max_row = max(self.max_row, row)
        cells = self._count(text, b"c") - self._count(tail, b"c")
        refs = text.count(b' r="') - tail.count(b' r="')
        self.cells += cells
        self.refs += refs
        self.rows += self._count(text, b"row") - self._count(tail, b"row")
        if cells > refs:  # cells placed by their order: count them row by row
            first, *rest = step.split(b"<" + self._ns + b"row")
            self._open_row += self._count(first, b"c")
            for piece in rest:
                self.widest = max(self.widest, self._open_row)
                self._open_row = self._count(piece, b"c")
            self.widest = max(self.widest, self._open_row)

    def _count(self, text: bytes, tag: bytes) -> int:
        """Elements ``<tag`` (also ``<tag…`` longer names: a count never too small)."""
        return text.count(b"<" + self._ns + tag)

    def height(self) -> int:
        """Rows calamine's range may span."""
        return max(self.rows, self.max_row)

    def width(self) -> int:
        """Columns calamine's range may span."""
        return max(self.widest, self.max_col)

    def area(self) -> int:
        """Rows x columns calamine's range may span."""
        return self.height() * self.width()


_REF_CHARS = 12  # an `r="…"` value read this far (XFD1048576 has 10)


def _max_refs(text: bytes) -> tuple[int, int]:
    """The largest column and row numbers among the ``r="…"`` attributes of ``text``.

    A value's leading capitals are its column (``XFD``: 16384), the digits after them
    its row; a row element's ``r="7"`` has no column. Values are read to 12 characters,
    so an overlong one counts as huge, never as small.
    """
    a = np.frombuffer(text, np.uint8)
    eq = np.flatnonzero(a == ord("=")) if len(a) > 4 else np.zeros(0, np.int64)
    eq = eq[(eq >= 2) & (eq + 1 < len(a))]
    at = eq[(a[eq - 1] == ord("r")) & (a[eq + 1] == ord('"')) & np.isin(a[eq - 2], _SPACES)]
    if not len(at):
        return 0, 0
    padded = np.concatenate([a, np.zeros(2 * _REF_CHARS, np.uint8)])
    span = np.arange(_REF_CHARS)
    ch = padded[at[:, None] + 2 + span]
    letters = np.argmin((ch >= ord("A")) & (ch <= ord("Z")), axis=1)  # leading capitals
    letters[(ch[:, -1] >= ord("A")) & (ch[:, -1] <= ord("Z")) & (letters == 0)] = _REF_CHARS
    num = padded[at[:, None] + 2 + letters[:, None] + span]
    is_digit = (num >= ord("0")) & (num <= ord("9"))
    digits = np.where(is_digit.all(axis=1), _REF_CHARS, np.argmin(is_digit, axis=1))
    col = np.zeros(len(at), np.float64)  # float: saturates, never wraps
    row = np.zeros(len(at), np.float64)
    for k in range(_REF_CHARS):
        col = np.where(k < letters, col * 26 + (ch[:, k] - 64.0), col)
        row = np.where(k < digits, row * 10 + (num[:, k] - 48.0), row)
    return int(min(col.max(), 1 << 62)), int(min(row.max(), 1 << 62))


_SPACES = np.array([ord(c) for c in " \t\r\n"], np.uint8)


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
                box.scan(step, tail)
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
                f"sheet `{part}` spans {box.height():,} row(s) x {box.width():,} "
                f"column(s) ({box.area():,} cells) by its cell references"
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
