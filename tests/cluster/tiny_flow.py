"""A flow of three numbers for a cluster started by ``thalweg cluster`` in a test.

Each number is written as a line to ``$TINY_FLOW_OUT`` (a file), so a test sees the flow
ran; with recovery, Bytewax refuses to run without the store's partitions.
"""

from __future__ import annotations

import os
from pathlib import Path

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource


def _append(value: int) -> None:
    with Path(os.environ["TINY_FLOW_OUT"]).open("a") as f:
        f.write(f"{value}\n")


flow = Dataflow("tiny")
numbers = op.input("numbers", flow, TestingSource(range(3)))
op.inspect("write", numbers, lambda _step, value: _append(value))
