"""Rust's ``DefaultHasher`` (SipHash-1-3, zero keys), as Bytewax 0.21.1 routes state keys.

Bytewax runs a stateful step's key on worker ``h(key) mod W``, where ``h`` hashes the
key's UTF-8 bytes and a ``0xff`` terminator (:func:`state_key_bytes`). :func:`siphash13`
is that hash of one message, :func:`siphash13_many` of many messages of one length at
once (the search for a routing key's salt, :func:`~.placement.routing_key`), and
:func:`state_worker` the worker a key runs on.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["siphash13", "siphash13_many", "state_key_bytes", "state_worker"]

_MASK = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK


def _words(data: bytes) -> list[int]:
    """The message words of SipHash: 8-byte little-endian blocks, the length in the last."""
    tail = len(data) % 8
    padded = data + b"\0" * ((8 - tail) % 8 if tail else 8)
    words = [int.from_bytes(padded[i : i + 8], "little") for i in range(0, len(padded), 8)]
    words[-1] |= (len(data) & 0xFF) << 56
    return words


def siphash13(data: bytes) -> int:
    """SipHash-1-3 of ``data`` with zero keys: Rust's ``DefaultHasher`` over raw bytes."""
    v0, v1, v2, v3 = 0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573

    def sipround() -> None:
        nonlocal v0, v1, v2, v3
        v0 = (v0 + v1) & _MASK
        v1 = _rotl(v1, 13) ^ v0
        v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & _MASK
        v3 = _rotl(v3, 16) ^ v2
        v0 = (v0 + v3) & _MASK
        v3 = _rotl(v3, 21) ^ v0
        v2 = (v2 + v1) & _MASK
        v1 = _rotl(v1, 17) ^ v2
        v2 = _rotl(v2, 32)

    for m in _words(data):
        v3 ^= m
        sipround()
        v0 ^= m
    v2 ^= 0xFF
    sipround()
    sipround()
    sipround()
    return v0 ^ v1 ^ v2 ^ v3


def state_key_bytes(key: str) -> bytes:
    """What Bytewax hashes for a state key: its UTF-8 bytes and Rust's ``str`` terminator."""
    return key.encode("utf-8", "surrogatepass") + b"\xff"


@functools.lru_cache(maxsize=65536)
def state_worker(key: str, workers: int) -> int:
    """The worker Bytewax 0.21.1 runs a stateful step's ``key`` on, among ``workers``."""
    return siphash13(state_key_bytes(key)) % workers


def siphash13_many(messages: np.ndarray) -> np.ndarray:
    """SipHash-1-3 (zero keys) of each row of ``messages`` (uint8, all one length)."""
    rows, length = messages.shape
    pad = (8 - length % 8) % 8 if length % 8 else 8
    padded = np.zeros((rows, length + pad), np.uint8)
    padded[:, :length] = messages
    padded[:, -1] = length & 0xFF
    words = padded.view("<u8")
    v0 = np.full(rows, 0x736F6D6570736575, np.uint64)
    v1 = np.full(rows, 0x646F72616E646F6D, np.uint64)
    v2 = np.full(rows, 0x6C7967656E657261, np.uint64)
    v3 = np.full(rows, 0x7465646279746573, np.uint64)

    def rotl(x: np.ndarray, b: int) -> np.ndarray:
        return (x << np.uint64(b)) | (x >> np.uint64(64 - b))

    def sipround() -> None:
        nonlocal v0, v1, v2, v3
        v0 = v0 + v1
        v1 = rotl(v1, 13) ^ v0
        v0 = rotl(v0, 32)
        v2 = v2 + v3
        v3 = rotl(v3, 16) ^ v2
        v0 = v0 + v3
        v3 = rotl(v3, 21) ^ v0
        v2 = v2 + v1
        v1 = rotl(v1, 17) ^ v2
        v2 = rotl(v2, 32)

    with np.errstate(over="ignore"):
        for i in range(words.shape[1]):
            m = words[:, i]
            v3 = v3 ^ m
            sipround()
            v0 = v0 ^ m
        v2 = v2 ^ np.uint64(0xFF)
        sipround()
        sipround()
        sipround()
    return v0 ^ v1 ^ v2 ^ v3
