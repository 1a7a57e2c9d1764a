"""ParquetSink: each lane file's footer claims its offsets and rows, checked before naming.

A name ``<first>-<last>`` cannot tell an offset the source never had (a transaction
marker, a compacted record) from a row lost afterwards. The footer's claim
(``thalweg.first_offset``, ``thalweg.last_offset``, ``thalweg.rows``) can: a file that
still holds the claimed rows under the claimed name lacks an offset because the sink
never got it. ``thalweg recover`` accepts such offsets as the source's; a file that
lost rows (or predates the claim) is still refused unless ``--allow-holes``.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.helpers import raw_batch
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.raw_lane import lane_rows_missing
from thalweg_bytewax.connectors.raw_lane._claim import claim_metadata, claim_problem, read_claim
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.coverage.recovery_plan import RecoveryPlan, check_lane_rows
from thalweg_bytewax.errors import SourceError

KEY = ("t", 0)
NAME = "00000000000000000000-00000000000000000009.parquet"


def _lane_with_markers(lane: Path) -> Path:
    """One file 0-9 whose batch had no record at 3 and 7 (transaction markers)."""
    part = ParquetSink(lane, shards=1).build_part("flow.lane", "shard-000", None)
    part.write_batch([raw_batch("t", 0, [0, 1, 2, 4, 5, 6, 8, 9])])
    part.snapshot()
    part.close()
    (path,) = lane.rglob("*.parquet")
    assert path.name == NAME
    return path


def test_a_finalized_file_claims_its_offsets_and_rows(tmp_path: Path) -> None:
    path = _lane_with_markers(tmp_path)
    meta = pq.read_metadata(path)
    assert read_claim(meta) == (0, 9, 8)
    assert meta.num_rows == 8


def test_offsets_missing_when_written_are_told_from_rows_lost_after(tmp_path: Path) -> None:
    path = _lane_with_markers(tmp_path)
    plan = RecoveryPlan("flow.ice", missing={KEY: OffsetCoverage([(0, 9)])})
    written: dict[tuple[str, int], list[tuple[str, OffsetCoverage]]] = {}
    missing = lane_rows_missing(tmp_path, plan.missing, written_holes=written)
    assert missing == {}
    assert written == {KEY: [(NAME, OffsetCoverage([(3, 3), (7, 7)]))]}
    holes = check_lane_rows(plan, missing, lane=str(tmp_path), written_holes=written)
    assert holes == {KEY: OffsetCoverage([(3, 3), (7, 7)])}

    # Rows 8 and 9 removed by hand, the claim copied over: it says 8 rows, the file
    # holds 6, so every offset it lacks is a lost row again.
    rows = pq.read_table(path)
    kept = rows.filter(pc.less(rows.column("_twg_source_offset"), 8))
    pq.write_table(kept.replace_schema_metadata(claim_metadata(0, 9, 8)), path)
    assert read_claim(pq.read_metadata(path)) == (0, 9, 8)
    written.clear()
    missing = lane_rows_missing(tmp_path, plan.missing, written_holes=written)
    assert written == {}
    assert missing == {KEY: [(NAME, OffsetCoverage([(3, 3), (7, 9)]))]}
    with pytest.raises(SourceError, match=r"lacks 3, 7\.\.9|lacks 3\.\.3"):
        check_lane_rows(plan, missing, lane=str(tmp_path), written_holes=written)


def test_a_file_without_a_claim_reads_as_before(tmp_path: Path) -> None:
    # A lane file written before the claim existed: its holes stay for --allow-holes.
    path = _lane_with_markers(tmp_path)
    table = pq.read_table(path).replace_schema_metadata(None)
    pq.write_table(table, path)
    assert read_claim(pq.read_metadata(path)) is None
    written: dict[tuple[str, int], list[tuple[str, OffsetCoverage]]] = {}
    missing = lane_rows_missing(tmp_path, {KEY: OffsetCoverage([(0, 9)])}, written_holes=written)
    assert written == {}
    assert missing == {KEY: [(NAME, OffsetCoverage([(3, 3), (7, 7)]))]}


def test_the_finalize_check_names_a_footer_that_disagrees(tmp_path: Path) -> None:
    # What the sink checks before it names a staging file: a claim, a row count or an
    # offset span other than staged stops the epoch instead of naming the file.
    path = _lane_with_markers(tmp_path)
    meta = pq.read_metadata(path)
    column = "_twg_source_offset"
    assert claim_problem(meta, 0, 9, 8, column) is None
    assert claim_problem(meta, 0, 9, 9, column) == (
        "its footer claims 8 rows at offsets 0..9; expected 9 rows at offsets 0..9"
    )
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata(claim_metadata(0, 19, 8)), path)
    assert claim_problem(pq.read_metadata(path), 0, 19, 8, column) == (
        "its offsets span 0..9; expected 0..19"
    )
