"""Sample orders by index, columnar: every value hashed from (seed, index, field).

Order ``i`` of a seed is a pure function of ``(seed, i)`` — any range, any partition,
any process computes the same order — and a whole range is computed at once with numpy
(splitmix64 over the index array), then encoded to Confluent-framed Avro from byte
tables, without a Python object per field. :func:`thalweg_bytewax.dev.samples.sample_order_at`
reads one order back as a dict; the two agree byte for byte (tests/dev/test_sample_columns.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

import numpy as np

__all__ = [
    "CITIES",
    "COUPONS",
    "JITTER_MS",
    "MAX_ITEMS",
    "SAMPLE_START",
    "SPACING_MS",
    "STATUSES",
    "SampleColumns",
    "avro_bodies",
    "sample_columns",
]

SAMPLE_START = datetime(2026, 1, 1, tzinfo=UTC)
"""When sample order 0 is created; order ``i`` about ``i`` x 100 ms later."""
SPACING_MS = 100
"""One order every 100 ms (10 a second) ..."""
JITTER_MS = 2_000
"""... each up to 2 s early or late: event time rises with the index, a little out of order."""
MAX_ITEMS = 4
"""At most this many lines per order."""
STATUSES = ("PENDING", "PAID", "SHIPPED", "CANCELLED")
"""The order statuses (the Avro enum's symbols)."""
CITIES = (("Lyon", "FR"), ("Porto", "PT"), ("Leeds", "GB"), ("Graz", "AT"), ("Turku", "FI"))
"""The shipping cities and their countries."""
COUPONS = (None, None, None, "WELCOME10", "SPRING")
"""The coupon values, drawn uniformly (so 3 in 5 orders have none)."""

_START_MS = int(SAMPLE_START.timestamp() * 1000)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
# Field ids of the hash: one independent stream per field (items: 16 + 4 * slot + part).
_N_ITEMS, _CUSTOMER, _STATUS, _NO_ADDRESS, _STREET, _CITY, _COUPON, _HI, _LO, _JITTER = range(10)


def _mix(x: Any) -> Any:
    """splitmix64's finaliser, elementwise (uint64 wraps on purpose)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


class SampleColumns:
    """The fields of some orders of one seed (by index), as numpy arrays."""

    def __init__(self, seed: int, indexes: np.ndarray) -> None:
        idx = indexes.astype(np.uint64)
        with np.errstate(over="ignore"):
            base = _mix(np.uint64(seed & 0xFFFFFFFFFFFFFFFF) + _GOLDEN) + idx * _GOLDEN
        self.index = idx.astype(np.int64)

        def field(fid: int, mod: int) -> np.ndarray:
            with np.errstate(over="ignore"):
                mixed: np.ndarray = _mix(base ^ (np.uint64(fid + 1) * _M2))
            return (mixed % np.uint64(mod)).astype(np.int64)

        self.n_items = field(_N_ITEMS, MAX_ITEMS) + 1
        self.sku = np.stack([field(16 + 4 * k, 500) + 1 for k in range(MAX_ITEMS)], axis=1)
        self.quantity = np.stack([field(17 + 4 * k, 5) + 1 for k in range(MAX_ITEMS)], axis=1)
        self.unit_cents = np.stack([field(18 + 4 * k, 49_901) + 100 for k in range(MAX_ITEMS)], 1)
        used = np.arange(MAX_ITEMS)[None, :] < self.n_items[:, None]
        self.total_cents = (self.quantity * self.unit_cents * used).sum(axis=1)
        self.customer_id = field(_CUSTOMER, 50_000) + 1
        self.status = field(_STATUS, len(STATUSES))
        self.has_address = field(_NO_ADDRESS, 10) != 0
        self.street = field(_STREET, 200) + 1
        self.city = field(_CITY, len(CITIES))
        self.coupon = field(_COUPON, len(COUPONS))
        jitter = field(_JITTER, 2 * JITTER_MS + 1) - JITTER_MS
        self.created_ms = _START_MS + np.maximum(0, self.index * SPACING_MS + jitter)
        # A version-4 UUID from 128 hashed bits (version and variant bits set).
        with np.errstate(over="ignore"):
            hi = _mix(base ^ (np.uint64(_HI + 1) * _M2))
            lo = _mix(base ^ (np.uint64(_LO + 1) * _M2))
        hi = (hi & np.uint64(0xFFFFFFFFFFFF0FFF)) | np.uint64(0x4000)
        lo = (lo & np.uint64(0x3FFFFFFFFFFFFFFF)) | np.uint64(0x8000000000000000)
        raw = np.empty((len(idx), 2), dtype=">u8")
        raw[:, 0], raw[:, 1] = hi, lo
        hexed = _HEX[raw.view(np.uint8).reshape(-1, 16)].reshape(-1, 32)
        self.uuid_text = np.insert(hexed, [8, 12, 16, 20], ord("-"), axis=1)  # (n, 36) uint8

    def __len__(self) -> int:
        return len(self.index)


_HEX = np.frombuffer(b"".join(f"{b:02x}".encode() for b in range(256)), np.uint8).reshape(256, 2)


def sample_columns(seed: int, indexes: range | list[int] | np.ndarray) -> SampleColumns:
    """The orders of ``seed`` at ``indexes`` (see the module docstring)."""
    if isinstance(indexes, range):
        idx = np.arange(indexes.start, indexes.stop, indexes.step, dtype=np.int64)
    else:
        idx = np.asarray(indexes, dtype=np.int64)
    return SampleColumns(seed, idx)


def _long(v: int) -> bytes:
    """Avro's zigzag varint of a long."""
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while z > 0x7F:  # noqa: PLR2004 - seven bits per byte
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _string(s: str) -> bytes:
    b = s.encode()
    return _long(len(b)) + b


def _decimal(cents: int) -> bytes:
    b = cents.to_bytes((cents.bit_length() + 8) // 8, "big", signed=True)
    return _long(len(b)) + b


@cache
def _tables() -> dict[str, list[bytes]]:
    """Byte tables of the small domains (built once, ~50 ms)."""
    return {
        # A line's sku and quantity (index sku * 6 + quantity); index 0 is no line.
        "sku_qty": [b""] * 6
        + [_string(f"SKU-{s:04d}") + _long(q) for s in range(1, 501) for q in range(6)],
        "price": [b""] + [_decimal(c) for c in range(1, 50_001)],
        "customer": [_long(i) for i in range(50_001)],
        "status_eur": [_long(i) + _string("EUR") for i in range(len(STATUSES))],
        # The items array's end (0), then the address union: 0 = null, else branch 1.
        "end_address": [b"\x00\x00"]
        + [
            b"\x00\x02" + _string(f"{n} Market Street") + _string(c) + _string(k)
            for n in range(201)
            for c, k in CITIES
        ],
        "coupon": [b"\x00" if c is None else b"\x02" + _string(c) for c in COUPONS],
        "count": [_long(n) for n in range(MAX_ITEMS + 1)],
    }


_UUID_LEN = _long(36)


def _ragged(mat: np.ndarray, lens: np.ndarray) -> list[bytes]:
    """Row ``i`` of ``mat`` cut to ``lens[i]`` bytes, for every row."""
    keep = np.arange(mat.shape[1])[None, :] < lens[:, None]
    data = mat[keep].tobytes()
    ends = np.cumsum(lens)
    return [data[a:b] for a, b in zip((ends - lens).tolist(), ends.tolist(), strict=True)]


def _longs(values: np.ndarray) -> list[bytes]:
    """Avro zigzag varints of non-negative longs, columnar."""
    z = values.astype(np.uint64) << np.uint64(1)
    groups = np.stack([(z >> np.uint64(7 * k)) & np.uint64(0x7F) for k in range(10)], 1)
    lens = np.maximum(1, (np.stack([z >> np.uint64(7 * k) for k in range(10)], 1) > 0).sum(1))
    more = np.arange(10)[None, :] < (lens - 1)[:, None]
    return _ragged((groups | (more * 0x80).astype(np.uint64)).astype(np.uint8), lens)


def _decimals(cents: np.ndarray) -> list[bytes]:
    """Avro decimal bytes (length, then big-endian two's complement) of non-negative cents."""
    width = np.where(cents < 0x80, 1, np.where(cents < 0x8000, 2, np.where(cents < 0x800000, 3, 4)))
    shifts = (width[:, None] - 1 - np.arange(4)[None, :]) * 8
    digits = (cents[:, None] >> np.maximum(shifts, 0)) & 0xFF
    mat = np.concatenate([(2 * width)[:, None], digits], axis=1).astype(np.uint8)
    return _ragged(mat, width + 1)


def avro_bodies(cols: SampleColumns, header: bytes) -> list[bytes]:
    """Each order of ``cols`` as ``header`` + its Avro body (header: the Confluent frame).

    Built column by column (numpy varints and decimals, byte tables for the small
    domains) and joined once per order, so no Python code runs per field.
    """
    t = _tables()
    n = len(cols)
    sku_qty, price = t["sku_qty"], t["price"]
    # The order id with its length and the frame in front: fixed width.
    prefix = np.frombuffer(header + _UUID_LEN, np.uint8)
    ids = np.concatenate([np.broadcast_to(prefix, (n, len(prefix))), cols.uuid_text], axis=1)
    heads = _ragged(np.ascontiguousarray(ids), np.full(n, ids.shape[1]))
    customer = [t["customer"][c] for c in cols.customer_id.tolist()]
    created = _longs(cols.created_ms)
    status_eur = [t["status_eur"][s] for s in cols.status.tolist()]
    totals = _decimals(cols.total_cents)
    counts = [t["count"][c] for c in cols.n_items.tolist()]
    slots = []
    for k in range(MAX_ITEMS):
        # An unused slot reads the empty entries: index 0 of both tables.
        used = cols.n_items > k
        line = np.where(used, cols.sku[:, k] * 6 + cols.quantity[:, k], 0).tolist()
        cents = np.where(used, cols.unit_cents[:, k], 0).tolist()
        slots.append([sku_qty[a] + price[c] for a, c in zip(line, cents, strict=True)])
    addr_index = np.where(cols.has_address, 1 + cols.street * len(CITIES) + cols.city, 0)
    tail = [t["end_address"][a] for a in addr_index.tolist()]
    coupons = [t["coupon"][c] for c in cols.coupon.tolist()]
    parts = (heads, customer, created, status_eur, totals, counts, *slots, tail, coupons)
    return list(map(b"".join, zip(*parts, strict=True)))
