"""RawLaneSource replays chosen offsets of a Parquet raw lane, in order, in bounded batches.

A raw lane is written by the real ``ParquetSink`` (one epoch per item, so each
topic-partition gets several files); the source then replays a plan with holes, from
files it must partly skip, and resumes from its snapshot (rule 2).
"""

from __future__ import annotations

from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.recovery import init_db_dir
from bytewax.testing import TestingSink, TestingSource, run_main

from tests.helpers import raw_batch, run_into
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.raw_lane import (
    RawLaneSource,
    lane_held_offsets,
    only_output,
)
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.records.metadata import MetadataColumns

COLS = MetadataColumns()


def write_lane(tmp_path: Path) -> Path:
    """Partitions 0 and 1 of topic ``t``: offsets 0..99, ten epochs (files) of ten each."""
    lane, recovery = tmp_path / "raw", tmp_path / "rec"
    recovery.mkdir()
    init_db_dir(recovery, 1)
    items = [
        (f"t:{p}", raw_batch("t", p, range(lo, lo + 10))) for lo in range(0, 100, 10) for p in (0, 1)
    ]
    run_into(items, ParquetSink(lane, shards=1), recovery=recovery)
    return lane


def replay(source: RawLaneSource) -> list[tuple[str, pa.RecordBatch]]:
    got: list[tuple[str, pa.RecordBatch]] = []
    flow = Dataflow("replay")
    op.output("out", op.input("in", flow, source), TestingSink(got))
    run_main(flow)
    return got


def test_held_offsets_come_from_the_finalized_file_names(tmp_path: Path) -> None:
    lane = write_lane(tmp_path)
    held = lane_held_offsets(lane)
    assert held == {("t", 0): OffsetCoverage([(0, 99)]), ("t", 1): OffsetCoverage([(0, 99)])}
    (lane / "t" / "1" / f"{20:020d}-{29:020d}.parquet").unlink()  # retention removed a file
    assert lane_held_offsets(lane)[("t", 1)] == OffsetCoverage([(0, 19), (30, 99)])


def test_a_plan_replays_exactly_its_offsets_in_order_in_bounded_batches(tmp_path: Path) -> None:
    lane = write_lane(tmp_path)
    plan = {
        ("t", 0): OffsetCoverage([(5, 14), (47, 63)]),
        ("t", 1): OffsetCoverage([(90, 120)]),  # past the lane's end: only 90..99 exist
    }
    seen: dict[str, int] = {}
    got = replay(RawLaneSource(lane, plan, batch_size=4, progress=seen.__setitem__))
    by_key: dict[str, list[int]] = {}
    for key, batch in got:
        assert batch.num_rows <= 4
        by_key.setdefault(key, []).extend(batch.column(COLS.source_offset).to_pylist())
    assert by_key["t:0"] == [*range(5, 15), *range(47, 64)]
    assert by_key["t:1"] == list(range(90, 100))
    assert seen == {"t:0": plan[("t", 0)].size, "t:1": plan[("t", 1)].size}
    # The envelope comes back as the lane holds it: every raw column, same values.
    table = pa.Table.from_batches([b for _, b in got])
    lane_rows = read_lane(lane, filter=None).sort_by(
        [(COLS.source_partition, "ascending"), (COLS.source_offset, "ascending")]
    )
    assert set(COLS.raw_schema.names) <= set(table.schema.names)
    first = lane_rows.filter(
        pa.compute.and_(
            pa.compute.equal(lane_rows[COLS.source_partition], 0),
            pa.compute.equal(lane_rows[COLS.source_offset], 5),
        )
    )
    assert table.slice(0, 1).select([COLS.source_value, COLS.record_id]).to_pylist() == (
        first.select([COLS.source_value, COLS.record_id]).to_pylist()
    )


def test_a_partition_resumes_after_the_last_offset_it_emitted(tmp_path: Path) -> None:
    lane = write_lane(tmp_path)
    source = RawLaneSource(lane, {("t", 0): OffsetCoverage([(3, 40)])}, batch_size=6)
    part = source.build_part("s.in", "t:0", None)
    first = part.next_batch()
    last_seen = first[0][1].column(COLS.source_offset).to_pylist()[-1]
    state = part.snapshot()
    part.close()
    assert state == last_seen + 1
    again = source.build_part("s.in", "t:0", state)
    resumed = again.next_batch()[0][1].column(COLS.source_offset).to_pylist()
    assert resumed[0] == last_seen + 1
    again.close()


def test_a_resume_state_for_an_unplanned_partition_is_refused(tmp_path: Path) -> None:
    lane = write_lane(tmp_path)
    source = RawLaneSource(lane, {("t", 0): OffsetCoverage([(0, 9)])})
    with pytest.raises(ConfigError, match=r"partition `t:1`"):
        source.build_part("s.in", "t:1", 5)


def test_only_output_keeps_the_named_output_and_names_the_others(tmp_path: Path) -> None:
    def build() -> Dataflow:
        flow = Dataflow("f")
        up = op.input("in", flow, TestingSource([1]))
        op.output("a", up, TestingSink([]))
        op.output("b", op.map("m", up, str), TestingSink([]))
        return flow

    flow = only_output(build(), "b")
    outputs = [s.step_id for s in flow.substeps if type(s).__name__ == "output"]
    assert outputs == ["f.b"]
    with pytest.raises(ConfigError, match=r"`f\.a`, `f\.b`"):
        only_output(build(), "c")
