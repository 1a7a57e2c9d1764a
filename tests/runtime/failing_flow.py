"""A flow whose file source fails inside a Bytewax run.

Run as ``python -m bytewax.run tests.runtime.failing_flow:flow`` with
``THALWEG_TEST_FILES`` naming a path where no file is: the source raises its error in a
callback Bytewax runs on a worker, which Bytewax wraps in its own runtime error.
"""

from __future__ import annotations

import os

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink

from thalweg_bytewax.connectors.files import FileSource

flow = Dataflow("failing")
rows = op.input(
    "in", flow, FileSource(os.environ["THALWEG_TEST_FILES"], format="ndjson", schema="infer")
)
op.output("out", rows, TestingSink([]))
