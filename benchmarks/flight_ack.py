"""Flight sink ack lane: pipelined confirms vs an inline wait after every batch.

A reference table server (``thalweg_bytewax.flight.table_server``) in its own process
answers every confirm after ``--confirm-ms`` (20 ms: a durable write on a remote
store). The same ``AckLane`` sends ``--batches`` RawBatches of ``--rows`` rows:

- ``pipelined``: sends return when the lane takes the batch; the lane confirms whatever
  queued up meanwhile with one round trip; one wait at the end (an epoch's commit);
- ``inline``: ``max_burst=1`` and a wait for the confirm after every send, the shape
  of a sink that awaits "durably acked offset N" before it takes the next batch.

Reported per variant: rows/s, batches per confirm (the in-flight depth: mean and
largest), the peak unconfirmed bytes, and the client's CPU per row
(``time.process_time``; the server is another process). The ratio is pipelined over
inline rows/s.

    python benchmarks/flight_ack.py                  # 400 batches of 1,000 rows, 20 ms
    python benchmarks/flight_ack.py --confirm-ms 5 --batches 200
    python benchmarks/flight_ack.py --store           # the server also writes and fsyncs
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import pyarrow as pa
import pyarrow.flight as flight

from thalweg_bytewax.connectors.flight._ack_lane import AckLane
from thalweg_bytewax.flight.table_server import TableServer
from thalweg_bytewax.records.batches import raw_batch_from_columns


class AckOnlyServer(TableServer):
    """The table server's protocol with the storage left out: its durable write is the
    ``confirm_delay`` alone, so the numbers are the ack lane's, not the disk's."""

    def _store(self, target: str, batches: list[pa.RecordBatch]) -> None:
        self.rows_stored += sum(b.num_rows for b in batches)


def serve(root: str, confirm_ms: float, *, store: bool) -> None:
    """The server process: print the port, then serve until killed."""
    kind = TableServer if store else AckOnlyServer
    server = kind(root, confirm_delay=timedelta(milliseconds=confirm_ms))
    print(server.port, flush=True)
    server.serve()


def batches(count: int, rows: int) -> list[pa.RecordBatch]:
    """``count`` RawBatches of partition 0, consecutive offsets, 100-byte payloads."""
    payload = [b"x" * 100] * rows
    keys = [b"k"] * rows
    return [
        raw_batch_from_columns(
            topic="bench",
            partition=0,
            offsets=range(i * rows, (i + 1) * rows),
            keys=keys,
            values=payload,
            cluster="bench",
        )
        for i in range(count)
    ]


def run(
    location: str, target: str, data: list[pa.RecordBatch], *, inline: bool
) -> dict[str, float]:
    """One variant over ``data``; its numbers."""
    descriptor = flight.FlightDescriptor.for_path(target)
    lane = AckLane(
        component=f"bench `{target}`",
        location=location,
        connect=lambda: flight.FlightClient(location),
        open_stream=lambda client, schema: client.do_put(descriptor, schema),
        max_unconfirmed_bytes=64 * 1024 * 1024,
        max_burst=1 if inline else 256,
        retry_for=30.0,
    )
    rows = sum(b.num_rows for b in data)
    cpu, wall = time.process_time(), time.perf_counter()
    for batch in data:
        last = batch.column("_twg_source_offset")[-1].as_py()
        lane.send(batch, {"bench:0": last})
        if inline:
            lane.wait_confirmed(60)
    lane.wait_confirmed(60)
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    stats = lane.stats
    lane.close()
    return {
        "rows_per_s": rows / wall,
        "seconds": wall,
        "confirms": stats.confirms,
        "mean_batches_per_confirm": stats.batches_sent / max(stats.confirms, 1),
        "max_batches_per_confirm": stats.max_burst,
        "peak_unconfirmed_mb": stats.peak_unconfirmed_bytes / 1e6,
        "cpu_us_per_row": cpu / rows * 1e6,
    }


def main() -> None:
    """Start the server, run both variants, print a table and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--confirm-ms", type=float, default=20.0)
    parser.add_argument(
        "--store", action="store_true", help="the server also writes and fsyncs each burst"
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.confirm_ms, store=args.store)
        return
    root = tempfile.mkdtemp(prefix="twg-flight-bench-")
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve",
            root,
            "--confirm-ms",
            str(args.confirm_ms),
            *(["--store"] if args.store else []),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        location = f"grpc://127.0.0.1:{int(proc.stdout.readline())}"
        data = batches(args.batches, args.rows)
        results = {
            "pipelined": run(location, "pipelined", data, inline=False),
            "inline": run(location, "inline", data, inline=True),
        }
    finally:
        proc.kill()
        proc.communicate()
    stored = ", stored and fsynced" if args.store else ""
    print(
        f"{args.batches} batches x {args.rows} rows, confirm after {args.confirm_ms:g} ms{stored}"
    )
    print("variant    rows/s     s  confirms  batches/confirm (mean, max)  peak MB  CPU us/row")
    for name, r in results.items():
        print(
            f"{name:9} {r['rows_per_s']:8.0f} {r['seconds']:5.2f} {r['confirms']:9.0f}"
            f"  {r['mean_batches_per_confirm']:6.1f}, {r['max_batches_per_confirm']:4.0f}"
            f"{'':19}{r['peak_unconfirmed_mb']:7.1f} {r['cpu_us_per_row']:11.2f}"
        )
    ratio = results["pipelined"]["rows_per_s"] / results["inline"]["rows_per_s"]
    print(f"ratio pipelined / inline: {ratio:.1f}x")
    print(json.dumps({**results, "ratio": ratio}))


if __name__ == "__main__":
    main()
