"""A flow that writes keyed batches of two source partitions into PostgreSQL, with recovery.

``python -m tests.recovery.postgres_flow DSN SCHEMA RECOVERY_DIR WORKERS``: 2 source
partitions x 8 batches x 50 rows, an epoch per batch, into ``<SCHEMA>.orders`` through a
two-shard :class:`PostgresSink`. ``THALWEG_FAULT`` kills it at a named point.
"""

from __future__ import annotations

import sys
from datetime import timedelta

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig
from bytewax.testing import TestingSource, cluster_main

from tests.connectors.postgres_helpers import batch
from thalweg_bytewax.connectors.postgres import PostgresSink

PARTITIONS = 2
BATCHES = 8
PER_BATCH = 50


def items() -> list[tuple[str, pa.RecordBatch]]:
    """Keyed batches of ``t:<p>``, interleaved across partitions, in offset order."""
    out = []
    for b in range(BATCHES):
        for p in range(PARTITIONS):
            offsets = list(range(b * PER_BATCH, (b + 1) * PER_BATCH))
            out.append((f"t:{p}", batch("t", p, offsets)))
    return out


def main() -> None:
    """Run the flow: ``postgres_flow DSN SCHEMA RECOVERY_DIR WORKERS``."""
    dsn, schema, recovery, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    flow = Dataflow("pg_crash")
    up = op.input("in", flow, TestingSource(items()))
    op.output("pg", up, PostgresSink(dsn, "orders", schema=schema, shards=2))
    cluster_main(
        flow,
        addresses=[],
        proc_id=0,
        worker_count_per_proc=workers,
        epoch_interval=timedelta(0),
        recovery_config=RecoveryConfig(recovery),
    )


if __name__ == "__main__":
    main()
