"""A flow for the coverage-recording crash tests: a Parquet lane recording into a store.

``python -m tests.coverage.coverage_flow LANE STORE RECOVERY_DIR`` runs ``items()``
(two source partitions, eight batches of five rows each) into a ``ParquetSink`` with
``coverage_store=STORE``, one epoch per batch, with recovery. Crash tests set
``THALWEG_FAULT`` to kill it at a fault point.
"""

from __future__ import annotations

import sys
from datetime import timedelta

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig
from bytewax.testing import TestingSource, run_main

from tests.runtime.jsonl_sink import items
from thalweg_bytewax.connectors.parquet import ParquetSink


def main() -> None:
    """Run the flow: ``main LANE STORE RECOVERY_DIR``."""
    lane, store, recovery = sys.argv[1:4]
    flow = Dataflow("coverage")
    up = op.input("in", flow, TestingSource(items()))
    op.output("lane", up, ParquetSink(lane, shards=2, coverage_store=store))
    run_main(flow, epoch_interval=timedelta(0), recovery_config=RecoveryConfig(recovery))


if __name__ == "__main__":
    main()
