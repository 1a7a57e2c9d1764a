"""A flow that runs until it is stopped: one number a second per worker, written nowhere.

For a cluster started by ``thalweg cluster`` in a test that probes it while it runs.
``ENDLESS_STEP_S`` seconds of work per number (a sleep: a sink's slow commit), each
start of it counted in the file ``ENDLESS_MARK`` names (if set), and with
``THALWEG_HTTP_PORT`` set the flow turns observability on as it is built, as a user's
flow does with ``observe(flow)`` (the server then answers from the flow's import on).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bytewax.operators as op
from bytewax.connectors.stdio import StdOutSink
from bytewax.dataflow import Dataflow
from bytewax.inputs import DynamicSource, StatelessSourcePartition

from thalweg_bytewax.observability import observe

WORK_S = float(os.environ.get("ENDLESS_STEP_S", "0"))
MARK = os.environ.get("ENDLESS_MARK")


class _Ticks(StatelessSourcePartition[int]):
    def __init__(self) -> None:
        self._n = 0
        self._next = datetime.now(UTC)

    def next_batch(self) -> list[int]:
        self._n += 1
        self._next = datetime.now(UTC) + timedelta(seconds=1)
        return [self._n]

    def next_awake(self) -> datetime:
        return self._next


class _Endless(DynamicSource[int]):
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Ticks:
        return _Ticks()


def _work(n: int) -> int:
    if MARK:
        Path(MARK).write_text(f"{n}\n")
    time.sleep(WORK_S)
    return n


flow = Dataflow("endless")
ticks = op.map("work", op.input("ticks", flow, _Endless()), _work)
op.output("out", op.filter("none", ticks, lambda _n: False), StdOutSink())
if os.environ.get("THALWEG_HTTP_PORT"):
    observe(flow)
