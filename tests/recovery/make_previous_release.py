"""Write ``tests/data/previous_release``: a release's store, for the resume test of the next.

Run from the repository root, on the commit whose code is the release::

    .venv/bin/python -m tests.recovery.make_previous_release

It runs :mod:`tests.recovery.previous_release_flow` at its fixed root over the first part
of its inputs, with recovery, and copies what the run left (the recovery store, the lanes
with the coverage store, the Iceberg warehouse and catalog, and the inputs as they were)
to ``tests/data/previous_release/store``. The second part of the inputs goes beside it
(``part_two.csv``, ``part_two_items.arrow``); ``WRITTEN_BY.txt`` names the commit and the
versions that wrote it. The library must have no uncommitted change: the store is what
that commit writes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from bytewax.recovery import init_db_dir

from tests.recovery import previous_release_flow as prf

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "data" / "previous_release"
STORE = FIXTURE / "store"
PART_TWO_CSV = FIXTURE / "part_two.csv"
PART_TWO_ITEMS = FIXTURE / "part_two_items.arrow"
CONTRACT = FIXTURE / "orders.odcs.yaml"


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def prepare(where: prf.Layout) -> None:
    """Lay out the first run's inputs and an empty recovery store under ``where.root``."""
    shutil.rmtree(where.root, ignore_errors=True)
    where.csv.parent.mkdir(parents=True)
    where.csv.write_text(prf.part_one_csv(), encoding="utf-8")
    shutil.copyfile(CONTRACT, where.contract)
    prf.write_ipc(prf.ipc_file(where, prf.IPC_ROWS[0]), prf.ipc_batch(prf.IPC_ROWS[0]))
    where.recovery.mkdir()
    init_db_dir(where.recovery, 1)


def main() -> None:
    """Write the fixture (see the module docstring)."""
    changed = _git("status", "--porcelain", "--", "thalweg_bytewax", "connectors", "operators")
    if changed:
        sys.exit(f"the library has uncommitted changes; commit them first:\n{changed}")
    where = prf.layout()
    with prf.root_lock():
        prepare(where)
        prf.run(where)
        shutil.rmtree(STORE, ignore_errors=True)
        shutil.copytree(where.root, STORE)
    PART_TWO_CSV.write_text(prf.part_two_csv(), encoding="utf-8")
    prf.write_ipc(PART_TWO_ITEMS, prf.ipc_batch(prf.IPC_ROWS[1]))
    lines = [
        f"commit {_git('rev-parse', 'HEAD')}",
        f"root {prf.ROOT}",
        *(f"{p} {version(p)}" for p in ("thalweg-bytewax", "bytewax", "pyarrow", "pyiceberg")),
    ]
    (FIXTURE / "WRITTEN_BY.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
