"""The walk of :mod:`._avro_walk` in Python, for an install without the C extension.

Private to :mod:`thalweg_bytewax.codecs._avro_walk`. It reads the same program and
reports the same status, offset and program word per body as ``_avro_native.walk`` in
its ``canonical=False`` mode (any layout the specification allows), with the same
bounds: a block count is checked against the bytes left over the fewest bytes an item
takes, and items that may take no byte against a budget per row, before any item is
read. It runs a body at a time, so it is only used where the exact path reads every
body with fastavro anyway.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from thalweg_bytewax.codecs._avro_walk_ops import (
    ARRAY,
    BOOL,
    BYTES,
    DECIMAL,
    DOUBLE,
    ENUM,
    FDECIMAL,
    FIXED,
    FLOAT,
    INT,
    LONG,
    MAP,
    NULL,
    RANGED,
    RECORD,
    STRING,
    UNION,
    UUID,
)

__all__ = ["Walked", "walk_py"]


class Walked(NamedTuple):
    """What a walk found: per row a status (0: proven) and the failing read's offset.

    Attributes:
        status: uint8 per row: 0, or a key of :data:`._avro_walk.REASONS`.
        where: int32 per row: the byte offset in the body of the read that failed.
        bad: How many rows failed.
        first: The first failed row, or -1.
        op: int32 per row: for :data:`._avro_walk.RANGE` and
            :data:`._avro_walk.PRECISION`, the program word of the value (a key of
            :func:`._avro_walk.labels`), else -1.
    """

    status: np.ndarray
    where: np.ndarray
    bad: int
    first: int
    op: np.ndarray


(
    _TRUNCATED,
    _CUT_VARINT,
    _LEFTOVER,
    _LONG_VARINT,
    _PADDED_VARINT,
    _INT_RANGE,
    _BAD_BOOLEAN,
    _BAD_BRANCH,
    _BAD_ENUM,
    _NEGATIVE_LENGTH,
    _BLOCKS,
    _BLOCK_SIZE,
    _COUNT,
    _BAD_UUID,  # canonical mode only
    _BAD_DECIMAL,  # canonical mode only
    _RANGE,
    _PRECISION,
) = range(1, 18)
_MAX_EMPTY_ITEMS = 1 << 16
_ITEM_MIN_CAP = 1 << 30
_RECORD_MIN_CAP = 1 << 40
_INT32 = (-(2**31), 2**31 - 1)
_MAX_CHECKED_PRECISION = 38  # as the C side: decimal128 (a decimal256 is checked when built)


class _Fail(Exception):  # noqa: N818 - a row's first failure, not an error
    def __init__(self, status: int, at: int, op: int = -1) -> None:
        self.status, self.at, self.op = status, at, op


class _Program:
    """A checked program: per word, where its subtree ends and the fewest bytes it takes."""

    def __init__(self, code: list[int]) -> None:
        self.code = code
        self.next = [0] * len(code)
        self.min = [0] * len(code)
        self._check(0)

    def _check(self, at: int) -> None:  # noqa: PLR0912 - one case per opcode
        code, op, i = self.code, self.code[at], at + 1
        least = 0
        if op in (BOOL, INT, LONG, BYTES, STRING, RANGED):
            least = 1
            i += 4 if op == RANGED else 0
        elif op in (FLOAT, DOUBLE):
            least = 4 if op == FLOAT else 8
        elif op == UUID:
            least = 37
        elif op in (FIXED, ENUM):
            least = code[i] if op == FIXED else 1
            i += 1
        elif op in (DECIMAL, FDECIMAL):
            least = code[i] if op == FDECIMAL else 1
            i += 2
        elif op in (RECORD, UNION):
            n = code[i]
            i += 1
            sizes = []
            for _ in range(n):
                self._check(i)
                sizes.append(self.min[i])
                i = self.next[i]
            least = min(sum(sizes), _RECORD_MIN_CAP) if op == RECORD else 1 + min(sizes)
        elif op in (ARRAY, MAP):
            self._check(i)
            i = self.next[i]
            least = 1
        self.next[at] = i
        self.min[at] = least


class _Row:
    """One body being walked."""

    def __init__(self, pg: _Program, body: bytes) -> None:
        self.pg, self.b, self.end = pg, body, len(body)
        self.empty_left = _MAX_EMPTY_ITEMS

    def long(self, p: int) -> tuple[int, int]:
        b, end, at, v = self.b, self.end, p, 0
        for k in range(10):
            if p >= end:
                raise _Fail(_TRUNCATED if k == 0 else _CUT_VARINT, at)
            c = b[p]
            p += 1
            if k == 9 and c > 1:  # noqa: PLR2004 - the tenth byte holds one bit
                raise _Fail(_LONG_VARINT, at)
            v |= (c & 0x7F) << (7 * k)
            if not c & 0x80:
                break
        return (v >> 1) ^ -(v & 1), p

    def run(self, p: int) -> tuple[int, int]:
        n, q = self.long(p)
        if n < 0:
            raise _Fail(_NEGATIVE_LENGTH, p)
        if n > self.end - q:
            raise _Fail(_TRUNCATED, p)
        return n, q + n

    def need(self, p: int, n: int) -> int:
        if self.end - p < n:
            raise _Fail(_TRUNCATED, p)
        return p + n

    def value(self, at: int, p: int) -> int:  # noqa: PLR0911, PLR0912 - one case per opcode
        code = self.pg.code
        op = code[at]
        if op == NULL:
            return p
        if op == BOOL:
            if p >= self.end:
                raise _Fail(_TRUNCATED, p)
            if self.b[p] > 1:
                raise _Fail(_BAD_BOOLEAN, p)
            return p + 1
        if op in (INT, LONG, ENUM, RANGED):
            v, q = self.long(p)
            if op == INT and not _INT32[0] <= v <= _INT32[1]:
                raise _Fail(_INT_RANGE, p)
            if op == ENUM and not 0 <= v < code[at + 1]:
                raise _Fail(_BAD_ENUM, p)
            if op == RANGED and not _word64(code, at + 1) <= v <= _word64(code, at + 3):
                raise _Fail(_RANGE, p, at)
            return q
        if op in (FLOAT, DOUBLE, FIXED):
            return self.need(p, 4 if op == FLOAT else 8 if op == DOUBLE else code[at + 1])
        if op in (BYTES, STRING):
            return self.run(p)[1]
        if op == UUID:  # any text: fastavro parses it (and refuses it)
            return self.run(p)[1]
        if op in (DECIMAL, FDECIMAL):
            if op == DECIMAL:
                n, q = self.run(p)
            else:
                n, q = code[at + 1], self.need(p, code[at + 1])
            if not _fits(self.b[q - n : q], code[at + 2]):
                raise _Fail(_PRECISION, p, at)
            return q
        if op == RECORD:
            i = at + 2
            for _ in range(code[at + 1]):
                p = self.value(i, p)
                i = self.pg.next[i]
            return p
        if op == UNION:
            v, q = self.long(p)
            if not 0 <= v < code[at + 1]:
                raise _Fail(_BAD_BRANCH, p)
            i = at + 2
            for _ in range(v):
                i = self.pg.next[i]
            return self.value(i, q)
        return self.blocks(at, p)

    def blocks(self, at: int, p: int) -> int:
        """An array or map: each block's count bounded before any of its items is read."""
        item, is_map = at + 1, self.pg.code[at] == MAP
        item_min = min(self.pg.min[item] + (1 if is_map else 0), _ITEM_MIN_CAP)
        while True:
            count_at = p
            count, p = self.long(p)
            if count == 0:
                return p
            sized_end = None
            if count < 0:
                if count == -(2**63):
                    raise _Fail(_COUNT, count_at)
                count = -count
                size_at = p
                size, p = self.long(p)
                if size < 0 or size > self.end - p:
                    raise _Fail(_BLOCK_SIZE if size < 0 else _TRUNCATED, size_at)
                sized_end = p + size
            if item_min > 0 and count > (self.end - p) // item_min:
                raise _Fail(_COUNT, count_at)
            if item_min == 0:
                if count > self.empty_left:
                    raise _Fail(_COUNT, count_at)
                self.empty_left -= count
            for _ in range(count):
                if is_map:
                    p = self.run(p)[1]
                p = self.value(item, p)
            if sized_end is not None and p != sized_end:
                raise _Fail(_BLOCK_SIZE, p)


def _word64(code: list[int], at: int) -> int:
    v = ((code[at] & 0xFFFFFFFF) << 32) | (code[at + 1] & 0xFFFFFFFF)
    return v - (1 << 64) if v >= 1 << 63 else v


def _fits(digits: bytes, precision: int) -> bool:
    if precision > _MAX_CHECKED_PRECISION:
        return True
    v = int.from_bytes(digits, "big", signed=True) if digits else 0
    return bool(abs(v) < 10**precision)


def walk_py(code: bytes, bodies: pa.BinaryArray) -> Walked:
    """:func:`._avro_walk.walk` of every body with ``canonical=False``, in Python."""
    pg = _Program(np.frombuffer(code, dtype=np.int32).tolist())
    n = len(bodies)
    status = np.zeros(n, dtype=np.uint8)
    where = np.zeros(n, dtype=np.int32)
    ops = np.full(n, -1, dtype=np.int32)
    for i, body in enumerate(bodies.to_pylist()):
        if body is None:
            continue
        try:
            row = _Row(pg, body)
            end = row.value(0, 0)
            if end != len(body):
                raise _Fail(_LEFTOVER, end)  # noqa: TRY301 - the row's one failure path
        except _Fail as failed:
            status[i], where[i], ops[i] = failed.status, failed.at, failed.op
    bad = np.flatnonzero(status)
    return Walked(status, where, len(bad), int(bad[0]) if len(bad) else -1, ops)
