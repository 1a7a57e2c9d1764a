"""A recovery store written before connectors/ and operators/ moved into the package resumes.

Bytewax pickles each stateful step's state into the store by class path; the move kept
every path (``thalweg_bytewax.operators.batching._State`` and the rest), so the rows a
``to_batches`` step held when the earlier release aborted come out after the move, and
the counter locator goes on where it stopped.
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from tests.recovery.pre_move_flow import ABORT_AT, ROWS, run
from thalweg_bytewax.records import MetadataColumns

STORE = Path(__file__).resolve().parents[1] / "fixtures" / "pre_move_recovery"
COLS = MetadataColumns()


def test_the_store_holds_state_pickled_under_the_operators_class_path() -> None:
    with closing(sqlite3.connect(STORE / "part-0.sqlite3")) as db:
        blobs = [b for (b,) in db.execute("SELECT ser_change FROM snaps") if b]
    assert any(b"thalweg_bytewax.operators.batching" in b for b in blobs)


def test_a_store_written_before_the_move_resumes_with_the_rows_it_held(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(STORE, store)
    got: list[Any] = []
    run(store, got, resumed=True)
    rows = [r for _, batch in got for r in batch.to_pylist()]
    # 0-8 were emitted before the abort; 9 and 10 were held in the step's state.
    assert [r["id"] for r in rows] == list(range(ABORT_AT - 2, ROWS))
    offsets = {r[COLS.source_offset] - r["id"] for r in rows}
    assert len(offsets) == 1, "the counter locator did not go on from the stored state"
