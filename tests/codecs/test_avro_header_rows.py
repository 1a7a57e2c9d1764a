"""The Avro codec finds schema-id headers column-wise, with the per-row answer.

Rows carrying ``__value_schema_id`` must be found exactly as the per-row reading of the
same headers finds them (sliced, chunked and null rows included), and a batch without
such headers must not build a Python object per row.
"""

from __future__ import annotations

import tracemalloc

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.codecs._avro_headers import header_rows as _header_rows
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS

HEADER_TYPE = DEFAULT_COLUMNS.raw_schema.field(DEFAULT_COLUMNS.source_headers).type

_name = st.sampled_from(["__value_schema_id", "trace", "__key_schema_id", ""])
_header = st.tuples(_name, st.one_of(st.none(), st.binary(max_size=6)))
_row = st.one_of(st.none(), st.lists(_header, max_size=3))


@given(rows=st.lists(_row, max_size=30), cut=st.integers(0, 5), split=st.integers(0, 30))
def test_columnar_matches_per_row(
    rows: list[list[tuple[str, bytes | None]] | None], cut: int, split: int
) -> None:
    arr = pa.array([None, *rows], HEADER_TYPE).slice(1 if cut else 0)
    expected = _header_rows(arr.to_pylist(), len(arr))
    assert _header_rows(arr, len(arr)) == expected
    chunked = pa.chunked_array([arr.slice(0, split), arr.slice(split)], HEADER_TYPE)
    assert _header_rows(chunked, len(arr)) == expected


def test_headers_without_schema_ids_build_no_row_objects() -> None:
    n = 100_000
    arr = pa.array([[("trace", b"x")]] * 10 + [[]] * (n - 10), HEADER_TYPE)
    _header_rows(arr, n)  # warm up the kernels
    tracemalloc.start()
    try:
        assert _header_rows(arr, n) == {}
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200_000, f"{peak} bytes of Python objects for {n} header rows"


def test_misaligned_header_column_is_a_config_error() -> None:
    arr = pa.array([[]] * 3, HEADER_TYPE)
    with pytest.raises(ConfigError, match="expected 4 header rows"):
        _header_rows(arr, 4)
