"""Record ids hashed in slices on several threads equal the ids of one call.

``record_ids_array`` cuts a large batch into slices hashed at once (the native hasher
releases the GIL); the split is forced here on small batches so that every boundary
case (nulls, empty payloads, sliced arrays, more threads than rows) is drawn.
"""

from __future__ import annotations

from unittest import mock

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

import thalweg_bytewax.records.ids as ids_mod
from thalweg_bytewax.records.ids import record_id, record_ids_array


@given(
    topic=st.text(max_size=40),
    rows=st.lists(
        st.tuples(st.integers(-(2**63), 2**63 - 1), st.none() | st.binary(max_size=80)),
        max_size=60,
    ),
    cut=st.integers(0, 5),
    split=st.integers(1, 7),
    threads=st.integers(2, 4),
)
def test_ids_hashed_in_slices_equal_single_record_ids(
    topic: str, rows: list[tuple[int, bytes | None]], cut: int, split: int, threads: int
) -> None:
    k = min(cut, len(rows))
    offsets = pa.array([o for o, _ in rows], pa.int64()).slice(k)
    values = pa.array([v for _, v in rows], pa.binary()).slice(k)
    expected = [record_id(None, topic, 0, o, v) for o, v in rows[k:]]
    with (
        mock.patch.object(ids_mod, "_HASH_SPLIT_ROWS", split),
        mock.patch.object(ids_mod, "_HASH_THREADS", threads),
    ):
        got = record_ids_array(None, topic, 0, offsets, values)
    assert got.to_pylist() == expected


def test_a_large_batch_without_payloads_hashes_in_slices() -> None:
    n = 4 * ids_mod._HASH_SPLIT_ROWS + 3
    offsets = pa.array(range(n), pa.int64())
    got = record_ids_array(None, "/data/x.parquet", 0, offsets, pa.nulls(n, pa.binary()))
    picks = [0, 1, n // 2, n - 1]
    assert [got[i].as_py() for i in picks] == [
        record_id(None, "/data/x.parquet", 0, i, None) for i in picks
    ]
