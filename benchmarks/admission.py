"""Admission control: peak RSS under a slow sink on the other worker, at N and 2N rows.

A ``FileSource`` reads one CSV file into an epoch sink whose ``stage`` costs ten times
what reading a row costs (measured first, per run), with two workers in one process
(``cluster_main(..., worker_count_per_proc=2)``). The file is listed second, behind an
empty one, and the sink has one shard: the file's partition is read on one worker and
its shard written on the other, so every batch crosses between workers. Each variant
runs in its own process (its peak RSS is its own, ``VmHWM``):

* ``admission``: the default budget (64 MiB per source partition);
* ``off``: ``THALWEG_ADMISSION_BYTES=0``, what Bytewax alone does (the epoch is its only
  bound, and the whole file is read within one epoch);
* ``fast``: the default budget and a sink that costs nothing: the growth of the flow
  itself from N to 2N rows, with nothing queued (the floor for the other two).

Prints peak RSS per variant at ``--rows`` and twice as many, the growth, and how often
the ledger put a read off (``waits``). ``--budget`` sets the ``admission`` variant's
budget in bytes.

    .venv/bin/python benchmarks/admission.py --rows 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyarrow as pa  # noqa: E402
import pyarrow.csv as pacsv  # noqa: E402
from _harness import peak_rss_mb  # noqa: E402
from typing_extensions import override  # noqa: E402

from thalweg_bytewax.coverage import OffsetCoverage  # noqa: E402
from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS  # noqa: E402
from thalweg_bytewax.runtime.epoch_sink import EpochSinkPartition, EpochSinkState  # noqa: E402
from thalweg_bytewax.runtime.sharded_sink import ShardedEpochSink  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])


class SlowSink(ShardedEpochSink["_SlowPartition"]):
    """An epoch sink that spends ``seconds_per_row`` per staged row and keeps nothing."""

    def __init__(self, seconds_per_row: float) -> None:
        self.shards = 1
        self.seconds_per_row = seconds_per_row

    @override
    def build_shard(
        self, step_id: str, shard: int, resume_state: EpochSinkState | None
    ) -> _SlowPartition:
        return _SlowPartition(self, shard, resume_state)


class _SlowPartition(EpochSinkPartition):
    def __init__(self, sink: SlowSink, shard: int, resume: EpochSinkState | None) -> None:
        super().__init__(
            component="slow sink",
            columns=DEFAULT_COLUMNS,
            resume_state=resume,
            shard=shard,
            shards=sink.shards,
        )
        self.sink = sink

    @override
    def open_partition(self, key: str, topic: str, partition: int) -> OffsetCoverage:
        return OffsetCoverage([])

    @override
    def stage(self, key: str, rows: pa.RecordBatch) -> None:
        time.sleep(rows.num_rows * self.sink.seconds_per_row)

    @override
    def commit_epoch(self) -> None:
        return None


def write_csv(path: Path, rows: int) -> None:
    """``rows`` rows of (id, name, amount), written in slices."""
    step = 200_000
    with pacsv.CSVWriter(path, SCHEMA) as writer:
        for start in range(0, rows, step):
            ids = pa.array(range(start, min(rows, start + step)), pa.int64())
            names = pa.compute.binary_join_element_wise("customer-", ids.cast(pa.string()), "")
            amounts = pa.compute.multiply(ids.cast(pa.float64()), 0.25)
            writer.write_batch(pa.RecordBatch.from_arrays([ids, names, amounts], schema=SCHEMA))


def read_seconds_per_row(path: Path, rows: int) -> float:
    """What reading a row of ``path`` costs through ``FileSource`` (one worker, no sink)."""
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, run_main

    from thalweg_bytewax.connectors.files import FileSource

    flow = Dataflow("admission_probe")
    batches = op.input("in", flow, FileSource(str(path), schema=SCHEMA))
    counted: list[int] = []
    op.output("out", op.map("n", batches, lambda kb: kb[1].num_rows), TestingSink(counted))
    started = time.perf_counter()
    run_main(flow)
    return (time.perf_counter() - started) / max(rows, 1)


def child(rows: int, workers: int, seconds_per_row: float, work: Path) -> dict[str, float]:
    """One variant: the flow over the file of ``rows`` rows; its peak RSS and wall clock."""
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import cluster_main

    from thalweg_bytewax.connectors.files import FileSource
    from thalweg_bytewax.runtime import admission

    data = work / "b_data.csv"
    base = peak_rss_mb()
    flow = Dataflow("admission_bench")
    source = FileSource([str(work / "a_empty.csv"), str(data)], schema=SCHEMA)
    batches = op.input("in", flow, source)
    op.output("slow", batches, SlowSink(seconds_per_row))
    started = time.perf_counter()
    cluster_main(flow, [], 0, worker_count_per_proc=workers)
    return {
        "rows": rows,
        "seconds": time.perf_counter() - started,
        "sink_us_per_row": seconds_per_row * 1e6,
        "rss_before_flow_mb": base,
        "peak_rss_mb": peak_rss_mb(),
        "budget_bytes": admission.ledger().budget,
        "releases": admission.ledger().releases,
        "waits": admission.ledger().waits,
    }


def run_variant(
    rows: int, work: Path, *, budget: str | None, workers: int, seconds_per_row: float
) -> dict[str, Any]:
    """Run one variant in a fresh interpreter (``budget`` sets THALWEG_ADMISSION_BYTES)."""
    import subprocess

    env = dict(os.environ)
    env.pop("THALWEG_ADMISSION_BYTES", None)
    if budget is not None:
        env["THALWEG_ADMISSION_BYTES"] = budget
    args = ["--child", "--rows", str(rows), "--workers", str(workers)]
    args += ["--seconds-per-row", repr(seconds_per_row), "--work", str(work)]
    out = subprocess.run(
        [sys.executable, __file__, *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=900,
    )
    if out.returncode != 0:
        raise SystemExit(f"admission benchmark child failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    """Parse arguments; run the variants (or, with ``--child``, one of them)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--slowdown", type=float, default=10.0)
    parser.add_argument("--variants", default="admission,off,fast")
    parser.add_argument("--budget", default=None, help="bytes (default: the ledger's)")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--seconds-per-row", type=float, default=0.0)
    parser.add_argument("--work", type=Path)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.rows, args.workers, args.seconds_per_row, args.work)))
        return
    variants = args.variants.split(",")
    print(json.dumps(measure(args.rows, variants, args.workers, args.slowdown, args.budget)))


def measure(
    rows: int, variants: list[str], workers: int, slowdown: float, budget: str | None = None
) -> dict[str, dict[Any, Any]]:
    """Peak RSS of each variant at ``rows`` and ``2 * rows``; printed as it goes."""
    budgets = {"admission": budget, "off": "0", "fast": budget}
    report: dict[str, dict[Any, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="twg-admission-") as tmp:
        files: dict[int, Path] = {}
        for n in (rows, 2 * rows):
            files[n] = Path(tmp) / str(n)
            files[n].mkdir()
            (files[n] / "a_empty.csv").write_text("id,name,amount\n", encoding="utf-8")
            write_csv(files[n] / "b_data.csv", n)
        # The sink's cost per row: `slowdown` times what reading a row costs here.
        per_row = slowdown * read_seconds_per_row(files[rows] / "b_data.csv", rows)
        for name in variants:
            for n in (rows, 2 * rows):
                result = run_variant(
                    n,
                    files[n],
                    budget=budgets[name],
                    workers=workers,
                    seconds_per_row=0.0 if name == "fast" else per_row,
                )
                report.setdefault(name, {})[n] = result
                print(
                    f"{name:>9} rows={n:>9,} peak_rss={result['peak_rss_mb']:7.1f} MB "
                    f"(before the flow {result['rss_before_flow_mb']:6.1f} MB) "
                    f"wall={result['seconds']:6.1f} s sink={result['sink_us_per_row']:.1f} "
                    f"us/row releases={result['releases']} waits={result['waits']}",
                    file=sys.stderr,
                    flush=True,
                )
            small, large = report[name][rows], report[name][2 * rows]
            growth = large["peak_rss_mb"] - small["peak_rss_mb"]
            report[name]["growth_mb"] = growth
            print(f"{name:>9} growth N -> 2N: {growth:+.1f} MB", file=sys.stderr, flush=True)
    return report


if __name__ == "__main__":
    main()
