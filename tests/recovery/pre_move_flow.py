"""A flow whose recovery store was written by the release before the package tree moved.

Before it, ``connectors/`` and ``operators/`` sat at the repository root and were mapped
into the package at install time. ``tests/fixtures/pre_move_recovery/`` holds the store
this flow left when it aborted under that release (installed from its wheel):
``to_batches`` had buffered rows in Bytewax state, pickled as
``thalweg_bytewax.operators.batching._State``. Written with::

    python tests/recovery/pre_move_flow.py tests/fixtures/pre_move_recovery
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSink, TestingSource, run_main

import thalweg_bytewax.operators as twg

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
ROWS = 20
ABORT_AT = 11  # with batches of 3, rows 9 and 10 are in state when the run aborts


def flow(got: list[Any], *, resumed: bool = False) -> Dataflow:
    """Rows in, batches of three out with a counter locator; aborts after row 10.

    ``resumed``: the run that resumes the store, where the abort has happened (an
    empty pause holds its place, so the items keep their indexes).
    """
    rows: list[Any] = [{"id": i, "name": str(i)} for i in range(ROWS)]
    stop = TestingSource.PAUSE(timedelta(0)) if resumed else TestingSource.ABORT()
    items = [*rows[:ABORT_AT], stop, *rows[ABORT_AT:]]
    flow = Dataflow("pre_move")
    up = op.input("in", flow, TestingSource(items))
    out = twg.to_batches("batches", up, schema=SCHEMA, max_rows=3, locator="counter")
    op.output("ok", out.batches, TestingSink(got))
    return flow


def run(recovery_dir: Path, got: list[Any], *, resumed: bool = False) -> None:
    """Run the flow against the recovery store in ``recovery_dir``, one epoch per item."""
    recovery = RecoveryConfig(str(recovery_dir))
    run_main(flow(got, resumed=resumed), epoch_interval=timedelta(0), recovery_config=recovery)


if __name__ == "__main__":
    store = Path(sys.argv[1])
    store.mkdir(parents=True)
    init_db_dir(store, 1)
    got: list[Any] = []
    run(store, got)  # aborts after row 10
    print(f"{sum(b.num_rows for _, b in got)} rows emitted before the abort; store in {store}")
