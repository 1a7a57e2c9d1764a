"""The buffer-level checks of the columnar paths equal their per-value definitions.

``peel_confluent_batch`` reads magic bytes and schema ids straight from the Arrow
buffers, and the Avro fast path's canonical-uuid check reads the string bytes instead of
a regex; both are compared here with the plain per-value rule on generated inputs,
sliced arrays and nulls included.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.budget import examples
from thalweg_bytewax.codecs import _avro_canonical
from thalweg_bytewax.codecs.framing import peel_confluent_batch

_framed = st.builds(
    lambda sid, body: b"\x00" + sid.to_bytes(4, "big") + body,
    st.integers(0, 2**32 - 1),
    st.binary(max_size=4),
)
_payloads = st.lists(st.one_of(st.none(), st.binary(max_size=8), _framed), max_size=30)


def _peel_one(value: bytes | None) -> tuple[int, bool]:
    if value is None or len(value) < 5 or value[0] != 0:
        return -1, False
    return int.from_bytes(value[1:5], "big"), True


@settings(max_examples=examples(200), deadline=None)
@given(values=_payloads, large=st.booleans(), start=st.integers(0, 5), stop=st.integers(0, 5))
def test_peel_confluent_batch_equals_the_per_value_rule(values, large, start, stop) -> None:
    arr = pa.array(values, pa.large_binary() if large else pa.binary())
    arr = arr.slice(min(start, len(arr)), max(0, len(arr) - start - stop))
    ids, ok = peel_confluent_batch(arr)
    want = [_peel_one(v) for v in arr.to_pylist()]
    assert ids.tolist() == [i for i, _ in want]
    assert ok.tolist() == [k for _, k in want]


def _uuid_variants(u: uuid.UUID, how: int, at: int, char: str) -> str | None:
    text = str(u)
    return [
        None,
        text,
        text,
        text.upper(),
        text + "\n",
        text.replace("-", ""),
        text[:at] + char + text[at + 1 :],
        text[:-1],
        "{" + text[1:-1] + "}",
    ][how]


_uuid_texts = st.lists(
    st.builds(
        _uuid_variants,
        st.uuids(),
        st.integers(0, 8),
        st.integers(0, 35),
        st.sampled_from(["g", "-", "0", "a", "F", "é", " "]),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=examples(300), deadline=None)
@given(values=_uuid_texts, start=st.integers(0, 2))
def test_uuid_byte_check_equals_the_regex(values, start) -> None:
    arr = pa.array(values, pa.string()).slice(min(start, len(values) - 1))
    if len(arr) == arr.null_count:
        return
    want = bool(pc.all(pc.match_substring_regex(arr, _avro_canonical._UUID_TEXT)).as_py())
    assert _avro_canonical._uuid_texts_canonical(arr.drop_null() if arr.null_count else arr) == want
