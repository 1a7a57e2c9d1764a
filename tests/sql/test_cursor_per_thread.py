"""A worker thread keeps its DuckDB cursor from batch to batch, on every entry point.

A cluster's worker (``cluster_main``, ``-i/-a``) gets an empty ``threading.local`` at
every batch; the cursors are kept per OS thread, so a worker opens one, not one a batch.
"""

from __future__ import annotations

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource

from tests.fixtures.flows import EntryPoint
from thalweg_bytewax.sql.engine import SqlSession, shared_cursor

BATCHES = 30


def test_each_worker_thread_opens_one_cursor_per_session(entry_point: EntryPoint) -> None:
    session = SqlSession(None)
    cursors: dict[str, set[int]] = {"shared": set(), "session": set()}
    held = []  # keep each cursor alive: an id is only unique among live objects

    def query(x: int) -> int:
        for kind, cur in (("shared", shared_cursor()), ("session", session.cursor())):
            held.append(cur)
            cursors[kind].add(id(cur))
            assert cur.execute("SELECT $1::INTEGER", [x]).fetchall() == [(x,)]
        return x

    flow = Dataflow("cursors")
    up = op.input("in", flow, TestingSource(list(range(BATCHES)), batch_size=1))
    op.output("out", op.map("query", up, query), TestingSink([]))
    entry_point(flow)
    # one worker, or two: a cursor per worker thread that ran a batch
    assert 1 <= len(cursors["shared"]) <= 2
    assert 1 <= len(cursors["session"]) <= 2
