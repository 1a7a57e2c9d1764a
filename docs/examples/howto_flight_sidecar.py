r"""Score each batch in a sidecar over Arrow Flight and land the answers on a Flight server.

``score`` is the sidecar's function: it gets a batch with its ``_twg_`` columns and
returns it with a ``score`` column appended (columnar, so the locator columns go back as
they came). Serve it in its own process::

    thalweg sidecar serve docs.examples.howto_flight_sidecar:score --port 8815

and run the flow against it (without ``--sidecar`` the script starts the sidecar in
this process)::

    python docs/examples/howto_flight_sidecar.py --sidecar grpc://127.0.0.1:8815

The flow sends 200 sample rows (4 partitions) through ``flight_transform`` and the
scored rows to a ``FlightSink`` whose target is a reference table server started here;
batches the sidecar cannot answer go to a DLQ list. It prints what landed.
"""

from __future__ import annotations

import argparse
import tempfile

import bytewax.operators as op
import pyarrow as pa
import pyarrow.compute as pc
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource, run_main

import thalweg_bytewax.operators as twg
from thalweg_bytewax.connectors.flight import FlightSink
from thalweg_bytewax.flight.sidecar import SidecarServer
from thalweg_bytewax.flight.table_server import TableServer
from thalweg_bytewax.records.batches import raw_batch_from_columns


def score(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The sidecar's work: the payload's length, halved, as a ``score`` column."""
    length = pc.binary_length(batch.column("_twg_source_value"))
    return batch.append_column("score", pc.divide(pc.cast(length, pa.float64()), 2.0))


def sample() -> list[tuple[str, pa.RecordBatch]]:
    """200 rows: 4 partitions of 50, in batches of 10, keyed by source partition."""
    items = []
    for first in range(0, 50, 10):
        for partition in range(4):
            offsets = list(range(first, first + 10))
            batch = raw_batch_from_columns(
                topic="orders",
                partition=partition,
                offsets=offsets,
                keys=[f"k{o}".encode() for o in offsets],
                values=[f'{{"order": {o}}}'.encode() for o in offsets],
            )
            items.append((f"orders:{partition}", batch))
    return items


def main() -> None:
    """Run the flow and print what landed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sidecar", help="the sidecar's location (default: start one here)")
    args = parser.parse_args()
    sidecar = None if args.sidecar else SidecarServer(score).serve_in_thread()
    location = args.sidecar or sidecar.location  # type: ignore[union-attr]
    target = TableServer(tempfile.mkdtemp(prefix="flight-target-")).serve_in_thread()

    flow = Dataflow("flight_sidecar")
    rows = op.input("in", flow, TestingSource(sample()))
    scored = twg.flight_transform("score", rows, location=location)
    op.output("scored", scored.ok, FlightSink(target.location, "scored_orders"))
    dead: list[tuple[str, pa.RecordBatch]] = []
    op.output("dlq", scored.rejected, TestingSink(dead))
    run_main(flow)

    landed = [target.read("scored_orders", "orders", p) for p in range(4)]
    table = pa.concat_tables([t for t in landed if t is not None])
    locators = set(
        zip(
            table["_twg_source_partition"].to_pylist(),
            table["_twg_source_offset"].to_pylist(),
            strict=True,
        )
    )
    print(
        f"{table.num_rows} rows scored and landed, {len(locators)} distinct locators, "
        f"{sum(b.num_rows for _, b in dead)} dead-lettered, "
        f"mean score {pc.mean(table['score']).as_py():.2f}"
    )
    target.shutdown()
    if sidecar is not None:
        sidecar.shutdown()


if __name__ == "__main__":
    main()
