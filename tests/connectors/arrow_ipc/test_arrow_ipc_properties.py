"""Properties of ArrowIPCSink: any replays, at any batch boundaries, land each offset once."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.budget import examples
from tests.helpers import raw_batch, run_into
from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSink, ArrowIPCSource

# A run: a start offset and cut points; it replays from `start` up to its last cut.
runs = st.lists(
    st.tuples(st.integers(0, 60), st.lists(st.integers(1, 25), min_size=1, max_size=4)),
    min_size=1,
    max_size=3,
)


@settings(max_examples=examples(20))  # each example runs up to three dataflows
@given(runs=runs, fmt=st.sampled_from(["file", "stream"]))
def test_replays_at_any_boundaries_hold_each_offset_once_and_read_back_in_order(
    runs: list[tuple[int, list[int]]], fmt: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        held: set[int] = set()
        high = -1
        for start, sizes in runs:
            # A resumed source replays from at most what the directory holds, in order.
            first = min(start, high + 1)
            items = []
            for size in sizes:
                items.append(("t:0", raw_batch("t", 0, range(first, first + size))))
                first += size
            run_into(items, ArrowIPCSink(root, format=fmt))
            held |= set(range(min(start, high + 1), first))
            high = max(high, first - 1)
        source = ArrowIPCSource(root)
        batches: list[pa.RecordBatch] = []
        for key in source.list_parts():
            part = source.build_part("s.in", key, None)
            try:
                while True:
                    batches.extend(b for _, b in part.next_batch())
            except StopIteration:
                part.close()
        offsets = pa.Table.from_batches(batches).column("_twg_source_offset").to_pylist()
        assert offsets == sorted(held)  # files list in offset order, each offset once
