"""Private to :mod:`thalweg_bytewax.connectors.files`: the bounds every reader checks.

A file is outside bytes: its length and count fields, its compressed sizes and its cell
references are claims, checked against :class:`FileLimits` before anything is
allocated for them. A claim over a bound ends as a DLQ row whose message starts with
the bound's code (``limit:max_line_bytes``) and says how to raise it; never as a crash
or unbounded memory.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import IO, Any

from thalweg_bytewax.errors import ConfigError

__all__ = ["DEFAULT_LIMITS", "FileLimits", "LimitExceeded", "LongLine", "over_limit"]


@dataclass(frozen=True, slots=True)
class FileLimits:
    """Bounds on what one file may make a :class:`FileSource` allocate.

    Each bound is checked before the allocation it guards. What exceeds one goes to
    the DLQ (reason ``decode``; the message starts with ``limit:<name>`` and names the
    file, the row and how to raise the bound), and reading goes on where the format
    lets it.

    Attributes:
        max_line_bytes: CSV and NDJSON: bytes in one line (the header line included).
            A longer line is one DLQ row holding its first ``max_line_bytes`` bytes; it
            is skipped while streaming, never held whole.
        max_decompressed_bytes: CSV and NDJSON files ending in ``.gz``, ``.bz2``,
            ``.zst`` or ``.lz4``: bytes decompressed from one file. The rest of the
            file past it is one DLQ row.
        max_block_bytes: Avro: bytes of one block, as stored and decompressed. A
            block over it is one DLQ row (its stored bytes when they fit the bound).
        max_block_records: Avro: records one block may declare (a zero-width record
            costs no bytes, so the byte bounds cannot bound its count); also the items
            of arrays of zero-width items (``null``, a record of ``null`` fields) in one
            block. Past it, the record that passes the bound and the rest of its block
            are one DLQ row with their bytes.
        max_cells: Excel: cells of a sheet's used range, rows x columns, read from the
            sheet's cell references before the sheet is loaded (xlsx, xlsm).
        max_sheet_bytes: Excel: bytes of one part of the workbook decompressed (a
            sheet's XML, the shared strings), read from the zip directory before
            anything is decompressed.
        max_piece_bytes: Parquet and Arrow IPC: bytes of one row group or record
            batch, uncompressed, as its metadata declares, plus 8 bytes a row (what
            its row indices cost). A row group over it is one DLQ row, unread, and
            the next one is read; an IPC batch over it ends the file as one DLQ row.
    """

    max_line_bytes: int = 16 << 20
    max_decompressed_bytes: int = 64 << 30
    max_block_bytes: int = 64 << 20
    max_block_records: int = 10_000_000
    max_cells: int = 20_000_000
    max_sheet_bytes: int = 1 << 30
    max_piece_bytes: int = 4 << 30

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                msg = f"FileLimits: `{f.name}` expected an integer >= 1; got {value!r}"
                raise ConfigError(msg)


DEFAULT_LIMITS = FileLimits()
"""The bounds a :class:`FileSource` uses unless given ``limits=``."""


def over_limit(name: str, value: int, what: str) -> str:
    """The message of a bound exceeded: its code, what exceeded it, how to raise it."""
    return (
        f"limit:{name} exceeded: {what} (limit {value:,}); raise it with "
        f"FileSource(limits=FileLimits({name}=...)) if the file is trusted"
    )


class LimitExceeded(Exception):
    """A file claims more than a bound allows; its message is from :func:`over_limit`."""


@dataclass(frozen=True, slots=True)
class LongLine:
    """A line longer than ``max_line_bytes``: its first bytes and its full length."""

    head: bytes
    size: int


class CappedStream:
    """A binary stream that raises :class:`LimitExceeded` past ``cap`` bytes read."""

    def __init__(self, f: Any, cap: int) -> None:
        self._f = f
        self._cap = cap
        self.total = 0

    def read(self, n: int) -> bytes:
        """At most ``n`` bytes, counted against the cap."""
        data = bytes(self._f.read(n))
        self.total += len(data)
        if self.total > self._cap:
            what = f"more than {self._cap:,} bytes decompressed from the file"
            raise LimitExceeded(over_limit("max_decompressed_bytes", self._cap, what))
        return data

    def __enter__(self) -> CappedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        close = getattr(self._f, "close", None)
        if close is not None:
            close()


def capped(f: IO[bytes] | Any, cap: int | None) -> Any:
    """``f`` itself, or ``f`` counted against ``cap`` bytes when a cap applies."""
    return f if cap is None else CappedStream(f, cap)
