"""PacedPartition: a source partition is next woken at the time it last set."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from thalweg_bytewax.dev._generated import GeneratedPartition


class _Counting(GeneratedPartition):
    def build(self, start: int, stop: int) -> pa.RecordBatch:
        return pa.RecordBatch.from_pydict({"n": list(range(start, stop))})


def test_a_partition_without_a_rate_asks_to_be_called_again_at_once() -> None:
    part = _Counting("k", next_offset=0, end=10, batch_size=4, records_per_s=None)
    assert part.next_awake() is None
    part.next_batch()
    assert part.next_awake() is None


def test_a_rate_limit_wakes_the_partition_after_its_rows_worth_of_time() -> None:
    part = _Counting("k", next_offset=0, end=10, batch_size=4, records_per_s=2.0)
    assert part.next_awake() is None
    before = datetime.now(UTC)
    part.next_batch()
    after = datetime.now(UTC)
    awake = part.next_awake()
    assert awake is not None
    assert before + timedelta(seconds=2) <= awake <= after + timedelta(seconds=2)


def test_waking_in_nothing_clears_the_time() -> None:
    part = _Counting("k", next_offset=0, end=10, batch_size=4, records_per_s=2.0)
    part.next_batch()
    part._wake_in(None)  # noqa: SLF001 - the base's own pacing call
    assert part.next_awake() is None
