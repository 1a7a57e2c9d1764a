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

Prints peak RSS per variant at ``--rows`` and twice as many, the most pyarrow's pool
held at once (``Arrow's peak``, of the largest process), the growth, and how often the
ledger put a read off (``waits``). ``--budget`` sets the ``admission`` variant's budget
in bytes; ``--env NAME=VALUE`` (repeatable) is set in every flow process's environment,
e.g. allocator settings.

    .venv/bin/python benchmarks/admission.py --rows 1000000

``--layout placed`` reads ``--files`` files of ``rows / files`` rows each into a sink of
16 shards instead, where thalweg's placement puts every file's shard on the worker
that reads it, at any ``--workers`` and ``--processes`` (``-i/-a`` style: one
``cluster_main`` per process on 127.0.0.1, the cluster declared to the placement);
``--layout crossing-shards`` is the same with one sink shard, so what the other workers
and processes read crosses to the first. Peak RSS is then the largest of the
processes', and each process's records pickled to another are printed.

    .venv/bin/python benchmarks/admission.py --rows 600000 --layout placed --files 3 --workers 3
    .venv/bin/python benchmarks/admission.py --rows 600000 --layout placed --files 3 --processes 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

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

    def __init__(self, seconds_per_row: float, shards: int = 1) -> None:
        self.shards = shards
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


def child(  # noqa: PLR0913 - one variant's settings
    rows: int,
    workers: int,
    seconds_per_row: float,
    work: Path,
    *,
    layout: str = "crossing",
    addresses: list[str] | None = None,
    process: int = 0,
) -> dict[str, float]:
    """One variant: the flow over the file of ``rows`` rows; its peak RSS and wall clock."""
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import cluster_main

    from thalweg_bytewax.connectors.files import FileSource
    from thalweg_bytewax.runtime import admission
    from thalweg_bytewax.runtime.crossings import crossings
    from thalweg_bytewax.runtime.placement import declare_cluster

    base = peak_rss_mb()
    flow = Dataflow("admission_bench")
    if layout == "crossing":
        paths = [str(work / "a_empty.csv"), str(work / "b_data.csv")]
        shards = 1
    else:
        paths = sorted(str(p) for p in work.glob("part-*.csv"))
        shards = 16 if layout == "placed" else 1
    batches = op.input("in", flow, FileSource(paths, schema=SCHEMA))
    op.output("slow", batches, SlowSink(seconds_per_row, shards))
    addresses = addresses or []
    if layout != "crossing":  # undeclared, Bytewax places the partitions: the file crosses
        declare_cluster(
            workers_per_process=workers, process_id=process, processes=max(len(addresses), 1)
        )
    started = time.perf_counter()
    cluster_main(flow, addresses, process, worker_count_per_proc=workers)
    return {
        "rows": rows,
        "seconds": time.perf_counter() - started,
        "sink_us_per_row": seconds_per_row * 1e6,
        "rss_before_flow_mb": base,
        "peak_rss_mb": peak_rss_mb(),
        "arrow_peak_mb": (pa.default_memory_pool().max_memory() or 0) / 2**20,
        "budget_bytes": admission.ledger().budget,
        "releases": admission.ledger().releases,
        "waits": admission.ledger().waits,
        **crossings().as_dict(),
    }


def run_variant(  # noqa: PLR0913 - one variant's settings
    rows: int,
    work: Path,
    *,
    budget: str | None,
    workers: int,
    seconds_per_row: float,
    layout: str = "crossing",
    processes: int = 1,
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run one variant in fresh interpreters (``budget`` sets THALWEG_ADMISSION_BYTES).

    With several processes, one per process of a cluster on 127.0.0.1; the result is
    the largest peak RSS of them, and the records each pickled. ``extra_env`` is set
    in each process's environment.
    """
    import socket
    import subprocess

    env = dict(os.environ)
    env.pop("THALWEG_ADMISSION_BYTES", None)
    env.update(extra_env or {})
    if budget is not None:
        env["THALWEG_ADMISSION_BYTES"] = budget
    args = ["--child", "--rows", str(rows), "--workers", str(workers), "--layout", layout]
    args += ["--seconds-per-row", repr(seconds_per_row), "--work", str(work)]
    addresses = ""
    if processes > 1:
        socks = [socket.socket() for _ in range(processes)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        addresses = ";".join(f"127.0.0.1:{sock.getsockname()[1]}" for sock in socks)
        for sock in socks:
            sock.close()
    commands = [
        [sys.executable, __file__, *args]
        + (["--process", str(i), "--addresses", addresses] if addresses else [])
        for i in range(processes)
    ]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for cmd in commands
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        if proc.returncode != 0:
            raise SystemExit(f"admission benchmark child failed:\n{err[-3000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    result: dict[str, Any] = max(results, key=lambda r: r["peak_rss_mb"])
    result["records_pickled_per_process"] = [r["records_pickled"] for r in results]
    result["peak_rss_per_process_mb"] = [r["peak_rss_mb"] for r in results]
    return result


def main() -> None:
    """Parse arguments; run the variants (or, with ``--child``, one of them)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument(
        "--layout", default="crossing", choices=["crossing", "placed", "crossing-shards"]
    )
    parser.add_argument("--files", type=int, default=3, help="data files of --layout placed")
    parser.add_argument("--process", type=int, default=0)
    parser.add_argument("--addresses", default="")
    parser.add_argument("--slowdown", type=float, default=10.0)
    parser.add_argument("--variants", default="admission,off,fast")
    parser.add_argument("--budget", default=None, help="bytes (default: the ledger's)")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set in every flow process's environment (e.g. an allocator's setting)",
    )
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--seconds-per-row", type=float, default=0.0)
    parser.add_argument("--work", type=Path)
    args = parser.parse_args()
    if args.child:
        addresses = args.addresses.split(";") if args.addresses else None
        result = child(
            args.rows,
            args.workers,
            args.seconds_per_row,
            args.work,
            layout=args.layout,
            addresses=addresses,
            process=args.process,
        )
        print(json.dumps(result))
        return
    variants = args.variants.split(",")
    shape = Shape(args.workers, args.processes, args.layout, args.files)
    extra_env = dict(pair.split("=", 1) for pair in args.env)
    report = measure(args.rows, variants, shape, args.slowdown, args.budget, extra_env)
    print(json.dumps(report))


class Shape(NamedTuple):
    """The cluster and the file layout a run measures."""

    workers: int = 2
    processes: int = 1
    layout: str = "crossing"
    files: int = 3


def measure(
    rows: int,
    variants: list[str],
    shape: Shape | int,
    slowdown: float,
    budget: str | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, dict[Any, Any]]:
    """Peak RSS of each variant at ``rows`` and ``2 * rows``; printed as it goes.

    ``extra_env`` is set in the environment of every process a variant runs in.
    """
    shape = shape if isinstance(shape, Shape) else Shape(workers=shape)
    budgets = {"admission": budget, "off": "0", "fast": budget}
    report: dict[str, dict[Any, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="twg-admission-") as tmp:
        files: dict[int, Path] = {}
        for n in (rows, 2 * rows):
            files[n] = Path(tmp) / str(n)
            files[n].mkdir()
            (files[n] / "a_empty.csv").write_text("id,name,amount\n", encoding="utf-8")
            write_csv(files[n] / "b_data.csv", n)
            if shape.layout != "crossing":
                for i in range(shape.files):
                    write_csv(files[n] / f"part-{i}.csv", n // shape.files)
        # The sink's cost per row: `slowdown` times what reading a row costs here.
        per_row = slowdown * read_seconds_per_row(files[rows] / "b_data.csv", rows)
        for name in variants:
            for n in (rows, 2 * rows):
                result = run_variant(
                    n,
                    files[n],
                    budget=budgets[name],
                    workers=shape.workers,
                    seconds_per_row=0.0 if name == "fast" else per_row,
                    layout=shape.layout,
                    processes=shape.processes,
                    extra_env=extra_env,
                )
                report.setdefault(name, {})[n] = result
                print(
                    f"{name:>9} rows={n:>9,} peak_rss={result['peak_rss_mb']:7.1f} MB "
                    f"(before the flow {result['rss_before_flow_mb']:6.1f} MB, "
                    f"Arrow's peak {result['arrow_peak_mb']:5.1f} MB) "
                    f"wall={result['seconds']:6.1f} s sink={result['sink_us_per_row']:.1f} "
                    f"us/row releases={result['releases']} waits={result['waits']} "
                    f"pickled={result['records_pickled_per_process']}",
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
