"""The structural scan of a refused Avro block reads lengths near 2**63 as too long.

A string or bytes length is a zigzag long: up to 2**63 - 1. Added to the position it
starts at, such a length wraps below zero, and a scan that compared the sum with the
body's end took the run as inside the body and indexed far outside it, so
``decode_batch`` raised instead of rejecting the row.
"""

from __future__ import annotations

import pytest

from tests.codecs.avro_wire import zz
from thalweg_bytewax.codecs.avro import AvroCodec
from thalweg_bytewax.codecs.base import FailureKind

SCHEMA = {
    "type": "record",
    "name": "Row",
    "fields": [{"name": "s", "type": "string"}, {"name": "n", "type": "long"}],
}


@pytest.mark.parametrize("length", [2**63 - 1, 2**63 - 10, 2**62])
def test_a_length_near_2_to_the_63_is_a_truncated_row_not_an_exception(length: int) -> None:
    good = zz(1) + b"a" + zz(5)
    result = AvroCodec(framing="none", schema=SCHEMA).decode_batch(
        [good, zz(length) + b"abc", good]
    )
    assert result.batch.to_pylist() == [{"s": "a", "n": 5}] * 2
    assert [(f.index, f.kind) for f in result.errors] == [(1, FailureKind.MALFORMED)]
    assert "body truncated" in result.errors[0].message
