"""RSS across restarts: the orders flow killed and resumed over and over, fast.

The soak (``benchmarks/soak.py``) takes half an hour to show how RSS moves from one
life of a process to the next. This runs the same flow as one process on librdkafka's
mock cluster, for ``--lives`` lives of ``--life-s`` seconds each (SIGKILL at the end of
each, then a restart from the last committed epoch, a snapshot every second), while a
producer writes sample orders at ``--rate`` a second. Per life it prints the peak RSS
(``VmHWM``), the mean RSS over the last 40 % of the life, and what the recovery store
holds of the dedup step: its serialized size and how many record ids it remembers.

    python benchmarks/restart_rss.py --lives 9 --life-s 30 --dedup-window 3600
    python benchmarks/restart_rss.py --lives 9 --life-s 30 --dedup-window 5

With a window longer than the whole run every id the flow ever saw is remembered, and
each restart restores all of them: the dedup state, and the RSS of each new life, grow
with the run's history until the window is reached. With a short window they do not.

``--down-s`` waits that long between a kill and the restart, so each life starts behind
by ``--rate`` times as many orders and catches up, as a restarted pod does;
``--snapshot-s`` sets the epoch (the soak's is 10 s). Catching up with a long downtime
can outrun the mock cluster's retention; the flow then refuses to resume (loudly):

    python benchmarks/restart_rss.py --lives 5 --life-s 60 --snapshot-s 10 --down-s 20 \
        --rate 500 --dedup-window 60
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEDUP_STEP = "orders.dedup.dedup.stateful_batch"


def produce(bootstrap: str, rate: float, halt: threading.Event) -> None:
    """Produce sample orders ``0, 1, 2, ...`` at ``rate`` a second until ``halt``."""
    from confluent_kafka import Producer

    from thalweg_bytewax.dev.samples import sample_orders_at

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    done, started = 0, time.monotonic()
    while not halt.is_set():
        target = int((time.monotonic() - started) * rate)
        if target > done:
            values, keys, stamps = sample_orders_at(range(done, target))
            for value, key, stamp in zip(values, keys, stamps, strict=True):
                while True:
                    try:
                        producer.produce("orders", value, key, timestamp=stamp)
                        break
                    except BufferError:
                        producer.poll(0.05)
            done = target
        producer.poll(0)
        halt.wait(0.1)
    producer.flush(30)


def dedup_state(recovery: Path) -> tuple[int, int]:
    """Bytes and remembered ids of the dedup step's newest snapshots in ``recovery``."""
    size = ids = 0
    with sqlite3.connect(recovery / "part-0.sqlite3") as conn:
        rows = conn.execute(
            "SELECT ser_change FROM snaps AS s WHERE step_id = ? AND snap_epoch = "
            "(SELECT max(snap_epoch) FROM snaps AS t WHERE t.step_id = s.step_id "
            "AND t.state_key = s.state_key)",
            (DEDUP_STEP,),
        ).fetchall()
    for (blob,) in rows:
        if blob is None:
            continue
        size += len(blob)
        _watermark, buckets = pickle.loads(blob)  # noqa: S301 - our own recovery store
        ids += sum(len(keys) for _, keys in buckets)
    return size, ids


def rss(pid: int) -> tuple[int, int] | None:
    """``(VmRSS, VmHWM)`` of ``pid`` in MB, or None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return None
    found = {
        line.split(":")[0]: int(line.split()[1]) // 1024
        for line in status.splitlines()
        if line.startswith(("VmRSS:", "VmHWM:"))
    }
    if len(found) < 2:  # noqa: PLR2004 - both lines, or a zombie
        return None
    return found["VmRSS"], found["VmHWM"]


def life(
    env: dict[str, str], recovery: Path, seconds: float, log: Path, snapshot_s: int = 1
) -> dict[str, Any]:
    """Run the flow for ``seconds``, SIGKILL it; its RSS numbers."""
    argv = [sys.executable, "-m", "bytewax.run", "-r", str(recovery), "-s", str(snapshot_s)]
    argv += ["-b", "0"]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*argv, "thalweg_bytewax.flows.orders"], env=env, stdout=out, stderr=out
        )
    started = time.monotonic()
    samples: list[tuple[float, int, int]] = []
    while proc.poll() is None and (t := time.monotonic() - started) < seconds:
        if (numbers := rss(proc.pid)) is not None:
            samples.append((t, *numbers))
        time.sleep(0.2)
    ended = proc.poll()
    proc.kill()
    proc.wait()
    if ended is not None or not samples:
        tail = log.read_text(errors="replace")[-2000:]
        raise SystemExit(f"the flow ended on its own (exit {ended}); the end of its log:\n{tail}")
    late = [r for t, r, _ in samples if t > seconds * 0.6]
    return {"hwm_mb": max(h for _, _, h in samples), "rss_late_mb": round(sum(late) / len(late))}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the lives and print one JSON line each."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lives", type=int, default=9)
    p.add_argument("--life-s", type=float, default=30.0)
    p.add_argument("--rate", type=float, default=1000.0, help="orders a second")
    p.add_argument("--dedup-window", default="3600", help="THALWEG_DEDUP_WINDOW (seconds)")
    p.add_argument("--snapshot-s", type=int, default=1, help="the epoch (seconds)")
    p.add_argument(
        "--down-s",
        type=float,
        default=0.0,
        help="seconds between a kill and the restart: each life starts behind by as many",
    )
    args = p.parse_args(argv)
    from thalweg_bytewax.testing import MockCluster

    home = Path(tempfile.mkdtemp(prefix="restart-rss-"))
    recovery = home / "recovery"
    recovery.mkdir()
    subprocess.run([sys.executable, "-m", "bytewax.recovery", str(recovery), "1"], check=True)
    halt = threading.Event()
    try:
        with MockCluster() as cluster:
            producer = threading.Thread(
                target=produce, args=(cluster.bootstrap, args.rate, halt), daemon=True
            )
            producer.start()
            env = {
                **os.environ,
                "THALWEG_BOOTSTRAP_SERVERS": cluster.bootstrap,
                "THALWEG_TOPIC": "orders",
                "THALWEG_TAIL": "1",
                "THALWEG_DATA_DIR": str(home / "data"),
                "THALWEG_DEDUP_WINDOW": args.dedup_window,
            }
            for i in range(args.lives):
                if i and args.down_s:
                    time.sleep(args.down_s)
                log = home / f"life-{i}.log"
                numbers = life(env, recovery, args.life_s, log, args.snapshot_s)
                size, ids = dedup_state(recovery)
                row = {"life": i, **numbers, "dedup_state_mb": round(size / 1e6, 2)}
                print(json.dumps({**row, "dedup_ids": ids}), flush=True)
            halt.set()
            producer.join()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
