"""Row JSON built column-wise is exactly the per-row orjson text, on generated batches."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.contracts.row_json import rows_as_json, value_json

FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, 1e16, 1e15, 1e-7, 1e-5, 5e-324, 1e22, 0.1]
)
TEXT = st.text(max_size=8) | st.sampled_from(['"', "\\", "\n", "\x1f\x0b", "é🚀", "/"])
STAMPS = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30))
COLUMNS = {
    "f": (pa.float64(), FLOATS),
    "f32": (pa.float32(), st.floats(width=32)),
    "s": (pa.string(), TEXT),
    "i": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "b": (pa.bool_(), st.booleans()),
    "d": (pa.decimal128(10, 3), st.decimals(-(10**6), 10**6, places=3, allow_nan=False)),
    "d8": (pa.decimal128(20, 8), st.decimals(-1, 1, places=8, allow_nan=False)),
    "ts": (pa.timestamp("us", tz="UTC"), STAMPS.map(lambda d: d.replace(tzinfo=UTC))),
    "naive": (pa.timestamp("ms"), STAMPS.map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))),
    "day": (pa.date32(), st.dates()),
    "raw": (pa.binary(), st.binary(max_size=6)),
    "span": (pa.duration("us"), st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=9))),
    "fl": (pa.list_(pa.float64()), st.lists(st.none() | FLOATS, max_size=3)),
    "st": (
        pa.struct([("x", pa.float64()), ("t", pa.string())]),
        st.fixed_dictionaries({"x": st.none() | FLOATS, "t": st.none() | TEXT}),
    ),
    "m": (pa.map_(pa.string(), pa.float64()), st.lists(st.tuples(TEXT, FLOATS), max_size=2)),
}


@st.composite
def batches(draw):
    names = draw(st.lists(st.sampled_from(sorted(COLUMNS)), min_size=1, max_size=5, unique=True))
    n = draw(st.integers(0, 6))
    arrays = []
    for name in names:
        type_, values = COLUMNS[name]
        arrays.append(pa.array(draw(st.lists(st.none() | values, min_size=n, max_size=n)), type_))
    batch = pa.RecordBatch.from_arrays(arrays, names=names)
    start = draw(st.integers(0, n))
    return batch.slice(start, draw(st.integers(0, n - start)))


@given(batches())
def test_row_json_is_the_per_row_orjson_text(batch):
    expected = [value_json(row) for row in batch.to_pylist()]
    assert rows_as_json(batch).to_pylist() == expected


def test_decimals_with_more_than_six_places_keep_str_exponent_form():
    batch = pa.RecordBatch.from_pydict(
        {"d": pa.array([Decimal("0.00000001"), Decimal("1.5")], pa.decimal128(20, 8))}
    )
    assert rows_as_json(batch).to_pylist() == ['{"d":"1E-8"}', '{"d":"1.50000000"}']


def test_times_keep_every_digit_of_their_fraction():
    # orjson 3.13 writes time(1, 2, 3, 16000) as "01:02:03.16000": a different instant.
    values = [time(1, 2, 3, 16000), time(1, 2, 3, 4000), time(1, 2, 3, 123456), time(1, 2, 3)]
    batch = pa.RecordBatch.from_pydict({"t": pa.array(values, pa.time64("us"))})
    assert rows_as_json(batch).to_pylist() == [
        '{"t":"01:02:03.016000"}',
        '{"t":"01:02:03.004000"}',
        '{"t":"01:02:03.123456"}',
        '{"t":"01:02:03"}',
    ]
