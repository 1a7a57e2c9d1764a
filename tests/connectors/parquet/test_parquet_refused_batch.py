"""ParquetSink: a batch refused on another shard leaves no file named for its offsets.

Rows of one topic-partition keyed by another column reach two shards (two workers); the
shard that does not own the partition refuses them loudly. The owning shard never saw
those offsets: the file it finalizes, and the coverage it records, must not claim them,
or a resume (keyed right, or with ``shards=1`` as the refusal suggests) skips the
refused rows as already written and they are lost.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.helpers import raw_batch
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.raw_lane._store import FINAL_NAME
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.coverage.store import SqliteCoverageStore
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.runtime.parts import route

KEY = "t:0"


def _other_shard(shards: int) -> int:
    return next(s for s in range(shards) if s != route(KEY, shards))


def _refused_middle(lane: Path, store: Path) -> None:
    """Offsets 0..9 and 20..29 on the owning shard; 10..19 refused on the other one."""
    sink = ParquetSink(lane, shards=2, coverage_store=store)
    owner = sink.build_part("flow.lane", f"shard-{route(KEY, 2):03d}", None)
    other = sink.build_part("flow.lane", f"shard-{_other_shard(2):03d}", None)
    owner.write_batch([raw_batch("t", 0, range(10))])
    with pytest.raises(ConfigError, match=r"routes to shard"):
        other.write_batch([raw_batch("t", 0, range(10, 20))])
    owner.write_batch([raw_batch("t", 0, range(20, 30))])
    owner.snapshot()  # another worker: its epoch closes before the flow stops
    owner.close()


def test_a_file_is_never_named_for_offsets_a_refused_batch_held(tmp_path: Path) -> None:
    lane, store = tmp_path / "lane", tmp_path / "coverage.sqlite3"
    _refused_middle(lane, store)
    for path in sorted(lane.rglob("*.parquet")):
        m = FINAL_NAME.match(path.name)
        assert m is not None
        first, last = int(m.group(1)), int(m.group(2))
        offsets = set(pq.read_table(path).column("_twg_source_offset").to_pylist())
        assert offsets == set(range(first, last + 1)), path.name
    held = {
        (e.topic, e.partition): e.coverage for e in SqliteCoverageStore(store).entries("flow.lane")
    }
    assert held == {("t", 0): OffsetCoverage([(0, 9), (20, 29)])}


def test_a_resume_after_the_refusal_lands_the_refused_rows(tmp_path: Path) -> None:
    # The refusal says: key by source partition, or use shards=1. Either way the rerun
    # replays 0..29 into the owning shard; the refused third must land, not be skipped.
    lane, store = tmp_path / "lane", tmp_path / "coverage.sqlite3"
    _refused_middle(lane, store)
    sink = ParquetSink(lane, shards=1, coverage_store=store)
    part = sink.build_part("flow.lane", "shard-000", None)
    part.write_batch([raw_batch("t", 0, range(30))])
    part.snapshot()
    part.close()
    got = sorted(read_lane(lane).column("_twg_source_offset").to_pylist())
    assert got == list(range(30))


def _names(lane: Path) -> list[str]:
    return sorted(p.name for p in lane.rglob("*.parquet"))


def test_a_replay_around_a_held_file_is_never_named_across_it(tmp_path: Path) -> None:
    # The lane holds 10..19 already; a rerun writes 0..29 in one batch. The skipped
    # middle stays the old file's: the new rows land as 0-9 and 20-29, not as a file
    # named 0-29 that would claim the middle twice.
    lane = tmp_path / "lane"
    first = ParquetSink(lane, shards=1).build_part("flow.lane", "shard-000", None)
    first.write_batch([raw_batch("t", 0, range(10, 20))])
    first.snapshot()
    first.close()
    again = ParquetSink(lane, shards=1).build_part("flow.lane", "shard-000", None)
    again.write_batch([raw_batch("t", 0, range(30))])
    again.snapshot()
    again.close()
    spans = [(int(n[:20]), int(n[21:41])) for n in _names(lane)]
    assert spans == [(0, 9), (10, 19), (20, 29)]
    assert sorted(read_lane(lane).column("_twg_source_offset").to_pylist()) == list(range(30))


def test_offsets_missing_inside_a_batch_stay_in_one_file(tmp_path: Path) -> None:
    # Offsets a source batch skips (transaction markers, a compacted topic) are the
    # source's: the batch is one file named for its first and last offset, and its
    # coverage claims the whole span, so a resume does not wait for them.
    lane, store = tmp_path / "lane", tmp_path / "coverage.sqlite3"
    part = ParquetSink(lane, shards=1, coverage_store=store).build_part(
        "flow.lane", "shard-000", None
    )
    part.write_batch([raw_batch("t", 0, [0, 1, 3, 4])])
    part.write_batch([raw_batch("t", 0, [5, 7])])
    part.write_batch([raw_batch("t", 0, [9, 10])])  # 8: between batches, no claim
    part.snapshot()
    part.close()
    assert _names(lane) == [
        "00000000000000000000-00000000000000000007.parquet",
        "00000000000000000009-00000000000000000010.parquet",
    ]
    held = {
        (e.topic, e.partition): e.coverage for e in SqliteCoverageStore(store).entries("flow.lane")
    }
    assert held == {("t", 0): OffsetCoverage([(0, 7), (9, 10)])}
