"""Where the decode flow's marginal CPU goes: two sizes, per thread, per function, per run.

Runs the flow of ``benchmarks/decode_e2e.py`` (``KafkaSource -> twg.decode ->
ParquetSink`` + DLQ sink) on N and 2N records of one shape and format, alternated, and
prints the marginal CPU per record (the 2N run minus the N run, per added record).

* In-process (default): a warm-up run first, so imports and first-batch set-up do not
  count; for each size the CPU of the process, its system part and page faults, and
  the CPU of each thread group (the Bytewax worker ``MainThread``, the ``twg-parquet``
  writers, the ``twg-decode`` pool, librdkafka's threads), read from
  ``/proc/self/task`` every 100 ms so that threads which end during a run still count.
  ``--cprofile PREFIX`` also profiles the worker thread (thread CPU time) and prints
  the marginal own time of its top 40 functions; ``--perf FILE`` runs
  ``perf record`` on the 2N runs (start Python with ``-X perf`` for Python frames).
* ``--fresh``: each run is a fresh ``decode_e2e.py --child`` process, as the benchmark
  runs it (start-up, imports and first-touch page faults included), with CPU and its
  system part from ``RUSAGE_CHILDREN``; ``--perf FILE`` wraps each in ``perf record``.
  ``--ab-pythonpath DIR`` pairs every run with one whose ``PYTHONPATH`` puts ``DIR``
  first (a copy of the package before a change), in turn: A B A B.

Usage::

    python benchmarks/decode_profile.py --records 300000 --format avro --repeat 3
    python benchmarks/decode_profile.py --records 300000 --format json --fresh \
        --ab-pythonpath /tmp/before
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import cProfile
import gc
import json
import os
import pstats
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from statistics import median
from typing import Any

from _decode_shapes import SHAPES, shape  # noqa: E402
from _harness import COMPRESSIONS, broker  # noqa: E402
from decode_e2e import _count_rows, _produce, _thalweg_flow  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")


def _read_tasks() -> dict[int, tuple[str, float]]:
    """CPU seconds and a name per live thread of this process."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[int, tuple[str, float]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
        except OSError:  # the thread ended
            continue
        fields = stat.rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / _TICK
        name = names.get(int(tid), comm)
        out[int(tid)] = (name.split("_")[0].rstrip("0123456789-") or name, cpu)
    return out


class _Sampler:
    """Every 100 ms, the CPU of each thread, so threads that end during a run still count."""

    def __init__(self) -> None:
        self.start = _read_tasks()
        self.last = dict(self.start)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            self.last.update(_read_tasks())

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        self.last.update(_read_tasks())
        out: dict[str, float] = defaultdict(float)
        for tid, (name, cpu) in self.last.items():
            out[name] += cpu - self.start.get(tid, (name, 0.0))[1]
        return out


def _cpu() -> tuple[float, float, int]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_stime, r.ru_minflt


def _run(
    fmt: str,
    shape_name: str,
    bootstrap: str,
    topics: list[str],
    expected: int,
    prof: cProfile.Profile | None,
) -> dict[str, Any]:
    from bytewax.testing import run_main

    out = Path(tempfile.mkdtemp(prefix="twg-decode-profile-"))
    try:
        flow = _thalweg_flow(shape(shape_name), fmt, bootstrap, topics, out)
        sampler, cpu0, t0 = _Sampler(), _cpu(), time.perf_counter()
        if prof is not None:
            prof.enable()
        run_main(flow)
        if prof is not None:
            prof.disable()
        wall, groups = time.perf_counter() - t0, sampler.stop()
        cpu1 = _cpu()
        cpu, sys_s, faults = (b - a for a, b in zip(cpu0, cpu1, strict=True))
        n = _count_rows(out / "orders")
        if n != expected:
            raise SystemExit(f"Parquet holds {n} records; expected {expected}")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    cpu -= groups.get("sampler", 0.0)
    return {"cpu": cpu, "sys": sys_s, "faults": faults, "wall": wall, "threads": groups}


def _fresh(
    args: argparse.Namespace, bootstrap: str, topics: dict[int, list[str]], total: int
) -> None:
    """Each size in a fresh ``decode_e2e.py --child`` process, optionally under perf.

    With ``--ab-pythonpath DIR`` every run is paired with one whose ``PYTHONPATH`` puts
    ``DIR`` first (another copy of the package), in turn: A B A B.
    """
    sides = ["A", "B"] if args.ab_pythonpath else ["A"]
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for i in range(args.repeat):
        for f in (1, 2):
            for side in sides:
                child = ["--child", f"thalweg-{args.format}", "--shape", args.shape]
                child += ["--bootstrap", bootstrap, "--topics", ",".join(topics[f])]
                child += ["--expected", str(total * f)]
                r = _fresh_run(args, side, f"{args.perf}.{side}.x{f}.{i}", child)
                runs.setdefault((side, f), []).append(r)
                print(
                    f"{side} x{f}: cpu {r['cpu_s']:.2f} s (sys {r['sys_s']:.2f}) wall "
                    f"{r['seconds']:.2f} peak RSS {r['peak_rss_mb']:.0f} MB",
                    flush=True,
                )
    per = 1e6 / total
    for side in sides:
        one, two = runs[side, 1], runs[side, 2]
        a, b = (median(r["cpu_s"] for r in rs) for rs in (one, two))
        sa, sb = (median(r["sys_s"] for r in rs) for rs in (one, two))
        lo = min(r["cpu_s"] for r in two) - min(r["cpu_s"] for r in one)
        rss = [median(r["peak_rss_mb"] for r in rs) for rs in (one, two)]
        print(
            f"\n{side}: fresh {args.shape} {args.format}: CPU us/record at 1x {a * per:.2f}, "
            f"2x {b * per / 2:.2f}; marginal {(b - a) * per:.2f} (cheapest runs "
            f"{lo * per:.2f}; system {(sb - sa) * per:.2f}); peak RSS MB {rss[0]:.0f} -> "
            f"{rss[1]:.0f}; load {os.getloadavg()}"
        )


def _fresh_run(
    args: argparse.Namespace, side: str, perf_file: str, child: list[str]
) -> dict[str, float]:
    from decode_e2e import _run_child

    env = dict(os.environ)
    if side == "B":
        env["PYTHONPATH"] = args.ab_pythonpath
    script = str(Path(__file__).with_name("decode_e2e.py"))
    cmd = [sys.executable, script, *child]
    if args.perf:
        env["PYTHONPERFSUPPORT"] = "1"
        cmd = ["perf", "record", *args.perf_args.split(), "-o", perf_file, "--"]
        cmd += [sys.executable, "-X", "perf", script, *child]
    elif side == "A":
        return _run_child(child, child[1])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    r: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    r["seconds"] = time.perf_counter() - t0
    r["cpu_s"] = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    r["sys_s"] = after.ru_stime - before.ru_stime
    return r


def _in_process(
    args: argparse.Namespace, bootstrap: str, topics: dict[int, list[str]], total: int
) -> None:
    """Both sizes in this process (after a warm-up run), alternated; print the split."""
    _run(args.format, args.shape, bootstrap, topics[1], total, None)  # warm-up
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    profs = {f: cProfile.Profile(time.thread_time) if args.cprofile else None for f in (1, 2)}
    if args.no_gc:
        gc.disable()
    for _ in range(args.repeat):
        for f in (1, 2):
            perf = None
            if args.perf and f == 2:
                cmd = ["perf", "record", *args.perf_args.split(), "-o", args.perf]
                perf = subprocess.Popen([*cmd, "-p", str(os.getpid())], stderr=subprocess.DEVNULL)
                time.sleep(0.5)
            r = _run(args.format, args.shape, bootstrap, topics[f], total * f, profs[f])
            runs[f].append(r)
            if perf is not None:
                perf.send_signal(signal.SIGINT)
                perf.wait()
            print(f"x{f}: cpu {r['cpu']:.2f} s wall {r['wall']:.2f} s", flush=True)
    per = 1e6 / total
    one, two = (median(r["cpu"] for r in runs[f]) for f in (1, 2))
    print(f"\n{args.shape} {args.format}, {total:,} / {2 * total:,} records")
    print(f"process CPU us/record at 1x {one * per:.2f}, marginal {(two - one) * per:.2f}")
    a, b = (median(r["sys"] for r in runs[f]) for f in (1, 2))
    print(f"  of it system: at 1x {a * per:.2f}, marginal {(b - a) * per:.2f}")
    a, b = (median(r["faults"] for r in runs[f]) for f in (1, 2))
    print(f"  page faults per record: at 1x {a / total:.3f}, marginal {(b - a) / total:.3f}")
    names = sorted({k for rs in runs.values() for r in rs for k in r["threads"]})
    for name in names:
        a = median(r["threads"].get(name, 0.0) for r in runs[1])
        b = median(r["threads"].get(name, 0.0) for r in runs[2])
        if max(a, b) > 0.005:
            print(f"  thread {name:<20} 1x {a * per:6.2f}  marginal {(b - a) * per:6.2f} us/rec")
    print(f"load average {os.getloadavg()}")
    if args.cprofile:
        _print_profile(args, profs, per)


def _print_profile(
    args: argparse.Namespace, profs: dict[int, cProfile.Profile | None], per: float
) -> None:
    stats = {}
    for f in (1, 2):
        prof = profs[f]
        assert prof is not None
        prof.dump_stats(f"{args.cprofile}.x{f}")
        stats[f] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    diff = []
    for fn, row in stats[2].items():
        before = stats[1].get(fn, (0, 0, 0.0, 0.0))
        diff.append((row[2] - before[2], row[3] - before[3], row[1] - before[1], fn))
    diff.sort(reverse=True)
    print("\nworker thread CPU, marginal own time (us/record), cumulative, calls added")
    reps = args.repeat
    for own, cum, calls, fn in diff[:40]:
        print(
            f"  {own / reps * per:7.3f} {cum / reps * per:7.3f} {calls // reps:>9}  "
            f"{Path(fn[0]).name}:{fn[1]} {fn[2]}"
        )


def main() -> None:
    """Produce, run N and 2N alternated, print per-thread and (optionally) per-function deltas."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--format", choices=["avro", "json"], default="avro")
    p.add_argument("--shape", choices=sorted(SHAPES), default="plain")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--bootstrap", default="")
    p.add_argument("--cprofile", default="", help="profile the worker thread; stats prefix")
    p.add_argument("--perf", default="", help="perf record the 2x runs into this file")
    p.add_argument("--perf-args", default="-F 1999 -g", help="perf record options")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="run each size as a fresh decode_e2e child (as the benchmark does), not in-process",
    )
    p.add_argument("--ab-pythonpath", default="", help="with --fresh: pair runs, B with it")
    p.add_argument("--no-gc", action="store_true", help="gc.disable() around the runs")
    p.add_argument("--partitions", type=int, default=0, help="as decode_e2e.py --partitions")
    p.add_argument(
        "--compression", default="none", choices=COMPRESSIONS, help="as decode_e2e.py"
    )
    args = p.parse_args()
    with broker(args.bootstrap) as bootstrap:
        topics, total, _ = _produce(
            bootstrap,
            shape(args.shape),
            args.format,
            args.records,
            int(time.time()),
            (1, 2),
            partitions=args.partitions,
            compression=args.compression,
        )
        if args.fresh:
            _fresh(args, bootstrap, topics, total)
        else:
            _in_process(args, bootstrap, topics, total)


if __name__ == "__main__":
    main()
