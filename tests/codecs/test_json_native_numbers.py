"""The native JSON reader's decimal fast path equals a correctly rounded parse, bit for bit.

A decimal of at most 15 significant digits and 22 fraction digits is read as
``m / 10**k`` (both exact doubles, one rounding); longer ones and exponents go through
``strtod``. Each generated text is compared with Python's ``float`` (correctly rounded)
and with the per-value path, on both sides of the fast path's limits.
"""

from __future__ import annotations

import struct

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.codecs.json_agreement import SCHEMA, assert_agrees
from tests.fixtures.budget import examples
from thalweg_bytewax.codecs._json_fast import NATIVE
from thalweg_bytewax.codecs.json import JsonCodec

_digits = st.text(alphabet="0123456789", min_size=0, max_size=20)


@st.composite
def _decimals(draw: st.DrawFn) -> bytes:
    sign = draw(st.sampled_from(["", "-"]))
    whole = draw(st.sampled_from(["0", *[str(d) for d in range(1, 10)]]))
    if whole != "0":
        whole += draw(_digits)
    fraction = draw(st.text(alphabet="0123456789", min_size=1, max_size=26))
    exponent = draw(st.sampled_from(["", "", "", "e5", "E-3", "e+12"]))
    return f"{sign}{whole}.{fraction}{exponent}".encode()


def setup_module() -> None:
    assert NATIVE, "the native JSON reader is not built: pip install -e . with a C compiler"


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(_decimals(), min_size=1, max_size=20))
def test_decimals_read_as_the_correctly_rounded_double(texts: list[bytes]) -> None:
    codec = JsonCodec(SCHEMA)
    payloads = [b'{"id": 1, "amt": %s, "sub": {"f": %s}}' % (t, t) for t in texts]
    res = codec.decode_batch(pa.array(payloads, pa.binary()))
    assert not res.errors
    amounts = res.batch.column("amt").to_pylist()
    nested = [s["f"] for s in res.batch.column("sub").to_pylist()]
    for text, amt, f in zip(texts, amounts, nested, strict=True):
        assert _bits(amt) == _bits(float(text)), text
        assert _bits(f) == _bits(float(text)), text
    assert_agrees(codec, payloads)  # type: ignore[arg-type]


EDGES = [
    b"0.0", b"-0.0", b"0.1", b"-0.1", b"0.5", b"123456789012345.6", b"1234567890123456.7",
    b"0.000000000000000000001", b"0.0000000000000000000001", b"0.00000000000000000000001",
    b"9007199254740.993", b"999999999999999.9", b"0.1234567890123456789012",
    b"0.30000000000000004", b"2.675", b"1.005", b"4.35",
]  # fmt: skip


def test_edge_decimals_read_as_the_correctly_rounded_double() -> None:
    codec = JsonCodec(SCHEMA)
    payloads = [b'{"id": 1, "amt": %s}' % t for t in EDGES]
    res = codec.decode_batch(pa.array(payloads, pa.binary()))
    assert not res.errors
    for text, amt in zip(EDGES, res.batch.column("amt").to_pylist(), strict=True):
        assert _bits(amt) == _bits(float(text)), text
