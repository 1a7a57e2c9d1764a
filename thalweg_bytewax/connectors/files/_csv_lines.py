"""Private to :mod:`thalweg_bytewax.connectors.files`: the lines of a CSV block.

A block of whole lines is read as spans of its buffer, without a copy: which lines are
rows (not blank, not a lone CR), which are not UTF-8 (found by halving a failing
range, a few validations per bad line), and a line's bytes as the file has them.
:mod:`._csv` parses blocks and sends the lines that are not UTF-8 to the DLQ.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["BlockLines", "count_rows", "not_utf8_message"]


def count_rows(block: bytes | pa.Buffer) -> int:
    """The rows of a block of whole lines: its lines that are not blank or a lone CR."""
    a = np.frombuffer(block, np.uint8)
    if not len(a):
        return 0
    nl = np.flatnonzero(a == ord("\n"))
    starts = np.concatenate(([0], nl + 1))
    ends = np.concatenate((nl, [len(a)]))
    length = ends - starts
    cr = (length == 1) & (a[np.minimum(starts, len(a) - 1)] == ord("\r"))
    return int(((length > 0) & ~cr).sum())


class BlockLines:
    """The lines of a block of whole lines, as spans of its buffer (no copy)."""

    def __init__(self, block: bytes | pa.Buffer) -> None:
        self.block = block
        self.bytes = np.frombuffer(block, np.uint8)
        nl = np.flatnonzero(self.bytes == ord("\n"))
        # Line i is bytes starts[i]:starts[i + 1], its newline included.
        self.starts = np.concatenate(([0], nl + 1)).astype(np.int64)
        if self.starts[-1] == len(block):  # nothing after the last newline
            self.starts = self.starts[:-1]
        self.bounds = np.append(self.starts, len(block))
        size = np.diff(self.bounds) - (self.bytes[self.bounds[1:] - 1] == ord("\n"))
        lone_cr = (size == 1) & (self.bytes[np.minimum(self.starts, len(block) - 1)] == ord("\r"))
        self.is_row = (size > 0) & ~lone_cr
        """Which lines are rows: not blank, not a lone CR (as :func:`count_rows`)."""

    def not_utf8(self) -> np.ndarray:
        """The indices of the lines that are not valid UTF-8, in order.

        The lines are one Arrow string array over the block's buffer; its full validation
        (UTF-8 included) runs on halves of a failing range down to single lines, so the
        cost is a few validations per bad line, not one per line.
        """
        n = len(self.starts)
        if not n:
            return np.zeros(0, np.int64)
        text = pa.LargeStringArray.from_buffers(
            n, pa.py_buffer(self.bounds), pa.py_buffer(self.block)
        )
        found: list[int] = []
        pending = [(0, n)]
        while pending:
            at, k = pending.pop()
            try:
                text.slice(at, k).validate(full=True)
            except pa.ArrowInvalid:
                if k == 1:
                    found.append(at)
                else:
                    half = k // 2
                    pending += [(at + half, k - half), (at, half)]
        return np.sort(np.asarray(found, np.int64))

    def raw(self, i: int) -> bytes:
        """Line ``i`` as it is in the file, without its line end."""
        line = self.bytes[int(self.bounds[i]) : int(self.bounds[i + 1])].tobytes()
        return line.removesuffix(b"\n").removesuffix(b"\r")


def not_utf8_message(raw: bytes) -> str:
    """The DLQ reason of a CSV row that is not UTF-8, naming its first bad byte."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # always: the line failed Arrow's validation
        return (
            f"CSV row is not UTF-8 text: byte 0x{raw[exc.start]:02x} at byte {exc.start} of "
            "the row; transcode the file to UTF-8 and replay the row"
        )
    return "CSV row is not UTF-8 text; transcode the file to UTF-8 and replay the row"
