"""Avro's wire encoding of single values, for tests that write bodies by hand."""

from __future__ import annotations


def zz(n: int) -> bytes:
    """``n`` as an Avro zigzag varint."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)
