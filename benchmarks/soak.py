"""Soak: the orders flow as a two-process cluster over Kafka, killed and resumed, for minutes.

A producer thread writes sample orders (Confluent-framed Avro, ``thalweg dev produce``'s
generator) to a topic at a steady rate; ``flows.orders`` follows it in tail mode as a
Bytewax cluster of two processes started the way pods start (``thalweg cluster orders``:
its own recovery and lake directories per pod, a snapshot every ``--snapshot-s``). Every
``--kill-every-s`` process 1 is SIGKILLed; process 0 then fails on its own, as it must,
and both start again and resume from the last committed epoch. Every ``--sample-s`` the
harness records, per flow process, its RSS, open files and threads (``/proc``), the
consumer lag (the topic's high watermarks minus the next offsets on each process's
``/stats``) and the rows landed in the ``orders`` table (the sinks' counters).

At the end the producer stops, the cluster catches up and is stopped, and the tables
are checked against what was produced: every order in ``orders`` exactly once (rows,
distinct order ids and distinct source offsets all equal to the count produced), every
item in ``order_lines`` exactly once, every record in the raw lane exactly once, no
reject. It writes ``samples.csv``, ``events.csv``, ``summary.json`` and ``soak.svg`` (a
plot with no plotting library) into ``--out`` and exits non-zero when a check fails:
loss or duplicates, the RSS slope over the last 20 minutes (or the run's second half,
when shorter) above ``--max-rss-growth`` (the first ``--settle-s`` after each start are
left out: the process is warming up), or lag that did not drain after the producer
stopped.

    THALWEG_KAFKA_CACHE=.cache/apache-kafka python benchmarks/soak.py --minutes 30

``--bootstrap HOST:PORT`` uses a running broker instead of starting Apache Kafka (the
jars come from ``THALWEG_KAFKA_CACHE``; Java 17+ is needed, Maven the first time).
The dedup window is ``--dedup-window-s`` (300 s, ``THALWEG_DEDUP_WINDOW``). The orders
flow dedups by record id with no event-time column, so its clock is ingest time: the
window is seconds of the run, and the remembered ids (``rate`` x (window + the minute
of allowed skew)) reach their steady size six minutes in, before the last 20 minutes
whose RSS slope is judged. ``--keep-snapshots`` (``THALWEG_ICEBERG_KEEP_SNAPSHOTS``,
the flow's 100 when unset) bounds each table's snapshot history, which a process loads
at every start: at 10 s epochs its bound (100 plus 12 before an expiry) is reached
after 19 minutes (9 for the upserted window table, two snapshots an epoch), so the
history grows until then.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
THALWEG = Path(sys.executable).with_name("thalweg")
TABLES = ("orders", "order_lines")
NAMESPACE = "sales"
SAMPLE_FIELDS = (
    "t_s",
    "process",
    "pid",
    "rss_mb",
    "open_files",
    "threads",
    "cpu_pct",
    "lag_records",
    "produced",
    "landed_orders",
    "landed_per_s",
)

# -- broker and topic --------------------------------------------------------------------


@contextlib.contextmanager
def broker(bootstrap: str | None, home: Path) -> Iterator[str]:
    """``bootstrap``, or a one-node Apache Kafka started for the run (stopped after)."""
    if bootstrap:
        yield bootstrap
        return
    from thalweg_bytewax.dev._apache_kafka import ApacheKafka
    from thalweg_bytewax.dev._kafka_jars import default_cache_dir, fetch_jars

    jars = fetch_jars(default_cache_dir())
    with ApacheKafka(jars, home, heap_mb=512) as kafka:
        yield kafka.bootstrap


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` (CreateTopics) and wait until every partition has a leader."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=-1)
    for future in admin.create_topics([new], operation_timeout=60).values():
        future.result(timeout=90)
    deadline = time.monotonic() + 60
    while True:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            if all(p.leader >= 0 for p in meta.partitions.values()):
                return
        if time.monotonic() > deadline:
            msg = f"topic {topic} has no leader for every partition after 60 s"
            raise SystemExit(msg)
        time.sleep(0.2)


class Watermarks:
    """The topic's high watermarks, per partition."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-probe"})
        self._parts = [TopicPartition(topic, p) for p in range(partitions)]

    def high(self) -> dict[int, int] | None:
        """``{partition: high watermark}``; None when the broker could not say right now."""
        from confluent_kafka import KafkaException

        try:
            return {
                tp.partition: self._consumer.get_watermark_offsets(tp, timeout=10)[1]
                for tp in self._parts
            }
        except KafkaException:  # a leader moving or not known yet: this sample has no lag
            return None

    def close(self) -> None:
        """Close the probe consumer."""
        self._consumer.close()


# -- the steady producer -----------------------------------------------------------------


class SteadyProducer(threading.Thread):
    """Produce sample orders ``0, 1, 2, ...`` at ``rate`` a second, idempotently.

    Order ``i`` is a pure function of ``i`` (``sample_orders_at``), so the checks at the
    end can recompute what was produced. A failed delivery is kept and raised by
    :meth:`finish`: the soak never guesses what the topic holds.
    """

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        super().__init__(name="soak-producer", daemon=True)
        from confluent_kafka import Producer

        self.topic = topic
        self.rate = rate
        self.produced = 0
        self.failures: list[str] = []
        self._halt = threading.Event()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 20,
                "compression.type": "lz4",
                "on_delivery": self._on_delivery,
            }
        )

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.failures.append(str(err))

    def run(self) -> None:
        """Produce in 100 ms ticks up to ``rate`` x elapsed seconds."""
        from thalweg_bytewax.dev.samples import sample_orders_at

        started = time.monotonic()
        while not self._halt.is_set():
            target = int((time.monotonic() - started) * self.rate)
            if target > self.produced:
                values, keys, stamps = sample_orders_at(range(self.produced, target))
                for value, key, stamp in zip(values, keys, stamps, strict=True):
                    while True:
                        try:
                            self._producer.produce(self.topic, value, key, timestamp=stamp)
                            break
                        except BufferError:
                            self._producer.poll(0.05)
                self.produced = target
            self._producer.poll(0)
            self._halt.wait(0.1)

    def finish(self) -> int:
        """Stop, deliver everything and return the number of orders produced."""
        self._halt.set()
        self.join()
        left = self._producer.flush(120)
        if left or self.failures:
            msg = f"the producer failed: {left} undelivered, errors {self.failures[:5]}"
            raise SystemExit(msg)
        return self.produced


# -- the cluster -------------------------------------------------------------------------


def free_addresses(n: int) -> str:
    """``-a`` of ``n`` processes on loopback ports free a moment ago."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ";".join(f"localhost:{p}" for p in ports)


def free_port() -> int:
    """A loopback port free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Pod:
    """One process of the cluster: ``thalweg cluster orders`` with its own directories."""

    index: int
    home: Path
    env: dict[str, str]
    http_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.log = self.home / "flow.log"

    @property
    def data(self) -> Path:
        """This pod's lake (``THALWEG_DATA_DIR``): lanes and the Iceberg warehouse."""
        return self.home / "data"

    def start(self, addresses: str, snapshot_s: float) -> None:
        """Start the pod's entry point (a new session: it and the flow's process)."""
        env = {
            **self.env,
            "THALWEG_PROCESS_ID": str(self.index),
            "THALWEG_CLUSTER_ADDRESSES": addresses,
            "THALWEG_RECOVERY_DIR": str(self.home / "recovery"),
            "THALWEG_SNAPSHOT_INTERVAL_S": f"{snapshot_s:g}",
            "THALWEG_DATA_DIR": str(self.data),
            "THALWEG_HTTP_PORT": str(self.http_port),
        }
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(THALWEG), "cluster", "orders"],
                cwd=self.home,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def alive(self) -> bool:
        """Whether the entry point still runs."""
        return self.proc is not None and self.proc.poll() is None

    def flow_pid(self) -> int | None:
        """The pid of the flow's process (the entry point's child), once started."""
        if not self.alive():
            return None
        assert self.proc is not None
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return None
        pids = children.split()
        return int(pids[0]) if pids else None

    def kill(self) -> None:
        """SIGKILL the pod's process group (the entry point and the flow)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=60)

    def wait_exit(self, timeout_s: float) -> int | None:
        """Wait for the entry point to end on its own; its exit code, or None if it did not."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stats(self) -> dict[str, Any] | None:
        """The flow's ``/stats``, or None while it is not serving."""
        url = f"http://127.0.0.1:{self.http_port}/stats"
        try:
            with urllib.request.urlopen(url, timeout=3) as response:  # noqa: S310 - loopback
                data: dict[str, Any] = json.load(response)
                return data
        except (OSError, ValueError):
            return None


_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def proc_numbers(pid: int) -> tuple[float, int, int, float] | None:
    """``(RSS MB, open files, threads, CPU seconds)`` of ``pid``; None if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss_kb = int(fields["VmRSS"].split()[0])
    utime, stime = stat.rsplit(")", 1)[1].split()[11:13]  # fields 14 and 15 of stat(5)
    return rss_kb / 1024, fds, int(fields["Threads"]), (int(utime) + int(stime)) * _TICK_S


# -- the run -----------------------------------------------------------------------------


@dataclass
class Soak:
    """The run's state: pods, producer, samples and events."""

    args: argparse.Namespace
    bootstrap: str
    topic: str
    work: Path
    pods: list[Pod] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    t0: float = field(default_factory=time.monotonic)
    life_start: dict[int, float] = field(default_factory=dict)
    last_landed: dict[int, tuple[float, int]] = field(default_factory=dict)
    last_cpu: dict[int, tuple[float, float]] = field(default_factory=dict)
    serving: bool = False

    def now(self) -> float:
        return time.monotonic() - self.t0

    def event(self, what: str) -> None:
        self.events.append({"t_s": round(self.now(), 1), "event": what})
        print(f"[{self.now():7.1f} s] {what}", flush=True)

    def start_cluster(self) -> None:
        self.serving = False
        addresses = free_addresses(len(self.pods))
        for pod in reversed(self.pods):  # process 0 last: the others wait for it
            pod.start(addresses, self.args.snapshot_s)
            self.life_start[pod.index] = self.now()
        self.event("cluster started")

    def kill_and_restart(self) -> None:
        victim = self.pods[-1]
        victim.kill()
        self.event(f"SIGKILL process {victim.index}")
        for pod in self.pods[:-1]:
            code = pod.wait_exit(120)
            if code is None:
                self.event(f"process {pod.index} still ran 120 s after its peer died: killed")
                pod.kill()
            else:
                self.event(f"process {pod.index} ended on its own with exit code {code}")
        self.start_cluster()

    def sample(self, producer: SteadyProducer | _Fixed, marks: Watermarks) -> None:
        t = self.now()
        high = marks.high()
        next_offsets: dict[int, int] = {}
        rows: list[dict[str, Any]] = []
        for pod in self.pods:
            pid = pod.flow_pid()
            numbers = proc_numbers(pid) if pid else None
            stats = pod.stats()
            landed = None
            if stats is not None:
                for key, source in stats.get("sources", {}).items():
                    if source.get("next_offset") is not None:
                        next_offsets[int(key.rsplit(":", 1)[1])] = source["next_offset"]
                sinks = stats.get("sinks", {})
                written = [v["rows_written"] for k, v in sinks.items() if k.endswith("ice_orders")]
                landed = sum(written)
            cpu_pct = None
            if pid and numbers:
                prev_cpu = self.last_cpu.get(pid)
                if prev_cpu is not None and t > prev_cpu[0]:
                    cpu_pct = (numbers[3] - prev_cpu[1]) / (t - prev_cpu[0]) * 100
                self.last_cpu[pid] = (t, numbers[3])
            per_s = None
            if landed is not None:
                prev_t, prev = self.last_landed.get(pod.index, (None, 0))
                if prev_t is not None and t > prev_t:
                    per_s = (landed - prev if landed >= prev else landed) / (t - prev_t)
                self.last_landed[pod.index] = (t, landed)
            else:
                self.last_landed.pop(pod.index, None)
            rows.append(
                {
                    "t_s": round(t, 1),
                    "process": pod.index,
                    "pid": pid or "",
                    "rss_mb": round(numbers[0], 1) if numbers else "",
                    "open_files": numbers[1] if numbers else "",
                    "threads": numbers[2] if numbers else "",
                    "cpu_pct": round(cpu_pct, 1) if cpu_pct is not None else "",
                    "landed_orders": landed if landed is not None else "",
                    "landed_per_s": round(per_s, 1) if per_s is not None else "",
                }
            )
        # A kill is only meaningful once the cluster formed and runs the flow: a peer
        # killed before then leaves the other process waiting to connect, not failing.
        self.serving = all(r["landed_orders"] != "" for r in rows)
        lag: int | str = ""
        if high is not None and set(next_offsets) == set(high):
            lag = sum(max(0, high[p] - next_offsets[p]) for p in high)
        for row in rows:
            row["lag_records"] = lag
            row["produced"] = producer.produced
        self.samples.extend(rows)
        live = self.args.out / "samples.csv"  # written as it goes: a long run can be watched
        with live.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(SAMPLE_FIELDS))
            if f.tell() == 0:
                writer.writeheader()
            writer.writerows(rows)

    def run(self) -> dict[str, Any]:
        args = self.args
        env = {
            **{k: v for k, v in os.environ.items() if k != "THALWEG_FAULT"},
            "THALWEG_BOOTSTRAP_SERVERS": self.bootstrap,
            "THALWEG_TOPIC": self.topic,
            "THALWEG_TAIL": "1",
            "THALWEG_DEDUP_WINDOW": f"{args.dedup_window_s:g}",
            **(
                {"THALWEG_ICEBERG_KEEP_SNAPSHOTS": str(args.keep_snapshots)}
                if args.keep_snapshots is not None
                else {}
            ),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        self.pods = [Pod(i, self.work / f"pod-{i}", env) for i in range(args.processes)]
        producer = SteadyProducer(self.bootstrap, self.topic, args.rate)
        marks = Watermarks(self.bootstrap, self.topic, args.partitions)
        duration = args.minutes * 60
        self.t0 = time.monotonic()
        producer.start()
        self.event(f"producing {args.rate:g} orders/s to {self.topic}")
        self.start_cluster()
        next_kill = args.kill_every_s if args.kill_every_s > 0 else math.inf
        next_sample = 0.0
        try:
            while self.now() < duration:
                if self.now() >= next_sample:
                    self.sample(producer, marks)
                    next_sample += args.sample_s
                late = self.now() >= next_kill and duration - self.now() > args.kill_every_s / 2
                if late and self.serving:
                    self.kill_and_restart()
                    next_kill = self.now() + args.kill_every_s
                for pod in self.pods:
                    if not pod.alive():
                        tail = pod.log.read_text(errors="replace")[-3000:]
                        msg = f"process {pod.index} ended unasked:\n{tail}"
                        raise SystemExit(msg)
                time.sleep(0.5)
            produced = producer.finish()
            self.event(f"producer stopped after {produced} orders")
            drained_s = self.drain(marks, produced)
        finally:
            with contextlib.suppress(Exception):
                producer.finish()
            for pod in self.pods:
                if pod.alive():
                    assert pod.proc is not None
                    pod.proc.send_signal(signal.SIGTERM)
            for pod in self.pods:
                if pod.alive() and pod.wait_exit(60) is None:
                    pod.kill()
            marks.close()
        self.event("cluster stopped")
        return {"produced": produced, "drained_s": drained_s}

    def drain(self, marks: Watermarks, produced: int) -> float | None:
        """Sample until the flow read everything and the orders sink stopped moving."""
        started = self.now()
        stable_since: float | None = None
        last: tuple[Any, ...] = ()
        wait = max(3 * self.args.snapshot_s, 15.0)
        while self.now() - started < self.args.drain_timeout_s:
            self.sample(_Fixed(produced), marks)
            recent = self.samples[-len(self.pods) :]
            landed = tuple(r["landed_orders"] for r in recent)
            if recent[0]["lag_records"] == 0 and "" not in landed:
                if landed != last:
                    last, stable_since = landed, self.now()
                elif stable_since is not None and self.now() - stable_since >= wait:
                    self.event(f"caught up {self.now() - started:.0f} s after the producer")
                    return self.now() - started
            time.sleep(self.args.sample_s)
        self.event("the flow did not catch up within the drain timeout")
        return None


@dataclass
class _Fixed:
    """A stopped producer's count, for samples taken while draining."""

    produced: int


# -- checks ------------------------------------------------------------------------------


def read_tables(pods: Sequence[Pod]) -> dict[str, Any]:
    """Every pod's ``orders`` / ``order_lines`` tables, raw lane and DLQ, concatenated."""
    import pyarrow as pa
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig
    from thalweg_bytewax.lanes import read_lane
    from thalweg_bytewax.lanes.dlq import DLQ_REASON, DLQ_RULES
    from thalweg_bytewax.records.metadata import MetadataColumns

    cols = MetadataColumns()
    where = [cols.source_partition, cols.source_offset]
    out: dict[str, list[pa.Table]] = {"orders": [], "order_lines": [], "raw": [], "dlq": []}
    snapshots: dict[str, list[int]] = {}
    for pod in pods:
        warehouse = pod.data / "warehouse"
        if warehouse.exists():
            catalog = IcebergCatalogConfig(warehouse=str(warehouse)).load()
            for name, columns in (
                ("orders", ["order_id", *where]),
                ("order_lines", ["order_id", "line_no", *where]),
            ):
                with contextlib.suppress(NoSuchTableError, NoSuchNamespaceError):
                    table = catalog.load_table(f"{NAMESPACE}.{name}")
                    out[name].append(table.scan(selected_fields=tuple(columns)).to_arrow())
                    snapshots.setdefault(name, []).append(len(table.metadata.snapshots))
        for lane, columns in (("raw", where), ("dlq", [*where, DLQ_REASON, DLQ_RULES])):
            path = pod.data / lane
            if path.exists() and any(path.rglob("*.parquet")):
                out[lane].append(read_lane(path, columns))
    found: dict[str, Any] = {k: pa.concat_tables(v) if v else None for k, v in out.items()}
    found["snapshots"] = snapshots
    return found


def check_tables(pods: Sequence[Pod], produced: int) -> dict[str, Any]:
    """Each table against the ``produced`` orders: counts, distinct keys, expected items."""
    import pyarrow.compute as pc

    from thalweg_bytewax.dev import _sample_columns as sample

    tables = read_tables(pods)
    items = 0
    for first in range(0, produced, 50_000):
        chunk = sample.sample_columns(7, range(first, min(first + 50_000, produced)))
        items += int(chunk.n_items.sum())

    def distinct(name: str, columns: Sequence[str]) -> int:
        table = tables[name]
        if table is None:
            return 0
        return int(table.select(list(columns)).group_by(list(columns)).aggregate([]).num_rows)

    orders, lines, raw, dlq = (tables[k] for k in ("orders", "order_lines", "raw", "dlq"))
    offsets = ["_twg_source_partition", "_twg_source_offset"]
    result = {
        "produced": produced,
        "orders_rows": orders.num_rows if orders is not None else 0,
        "orders_distinct_ids": (
            pc.count_distinct(orders["order_id"]).as_py() if orders is not None else 0
        ),
        "orders_distinct_offsets": distinct("orders", offsets),
        "order_lines_expected": items,
        "order_lines_rows": lines.num_rows if lines is not None else 0,
        "order_lines_distinct": distinct("order_lines", ["order_id", "line_no"]),
        "raw_rows": raw.num_rows if raw is not None else 0,
        "raw_distinct_offsets": distinct("raw", offsets),
        "dlq_rows": dlq.num_rows if dlq is not None else 0,
        # Why each DLQ row is there: "<reason> <failed rules>" -> rows (a run's directories
        # are removed at its end, so this is what is left to read the reasons from).
        "dlq_reasons": dlq_reasons(dlq),
        # Snapshots each pod's tables kept at the end (bounded by --keep-snapshots).
        "snapshots_kept": tables["snapshots"],
    }
    result["exactly_once"] = (
        result["orders_rows"]
        == result["orders_distinct_ids"]
        == result["orders_distinct_offsets"]
        == produced
        and result["order_lines_rows"] == result["order_lines_distinct"] == items
        and result["raw_rows"] == result["raw_distinct_offsets"] == produced
        and result["dlq_rows"] == 0
    )
    return result


def dlq_reasons(dlq: pa.Table | None) -> dict[str, int]:
    """The DLQ rows counted by reason code and failed rules, e.g. ``{"dq total_range": 2}``."""
    from thalweg_bytewax.lanes.dlq import DLQ_REASON, DLQ_RULES

    if dlq is None or dlq.num_rows == 0:
        return {}
    keys = [
        " ".join([reason, *sorted(rules or [])])
        for reason, rules in zip(
            dlq[DLQ_REASON].to_pylist(), dlq[DLQ_RULES].to_pylist(), strict=True
        )
    ]
    return dict(sorted(Counter(keys).items()))


def slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of ``(x, y)`` points (0 with fewer than two x values)."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def memory_numbers(
    samples: Sequence[dict[str, Any]],
    events: Sequence[dict[str, Any]],
    processes: int,
    window_s: float,
    settle_s: float,
) -> dict[str, Any]:
    """Per process: the RSS slope over the last ``window_s``, and each life's RSS.

    Samples within ``settle_s`` of a (re)start are left out: the process is warming up.
    A life is one process from its start to its kill; its RSS at the end (the median of
    its last three samples) shows whether a restarted process settles higher as the
    run goes on, and its own slope (settled samples) whether it grows while it runs.
    """
    end = max((float(s["t_s"]) for s in samples), default=0.0)
    starts = sorted(float(e["t_s"]) for e in events if e["event"] == "cluster started")
    out: dict[str, Any] = {"window_s": window_s}
    for proc in range(processes):
        mine = [s for s in samples if str(s["process"]) == str(proc) and s["rss_mb"] != ""]
        points = []
        lives: dict[float, list[tuple[float, float]]] = {}
        for s in mine:
            t = float(s["t_s"])
            life = max((x for x in starts if x <= t), default=0.0)
            if t - life < settle_s:
                continue
            lives.setdefault(life, []).append((t, float(s["rss_mb"])))
            if t >= end - window_s:
                points.append((t, float(s["rss_mb"])))
        per_s = slope(points)
        mean = sum(y for _, y in points) / len(points) if points else 0.0
        growth = per_s * window_s / mean * 100 if mean else 0.0
        life_ends = [sorted(y for _, y in pts[-3:])[len(pts[-3:]) // 2] for pts in lives.values()]
        life_slopes = [slope(pts) * 60 for pts in lives.values() if len(pts) > 2]
        out[f"process_{proc}"] = {
            "samples": len(points),
            "rss_mean_mb": round(mean, 1),
            "rss_max_mb": round(max((y for _, y in points), default=0.0), 1),
            "rss_slope_mb_per_min": round(per_s * 60, 3),
            "rss_growth_pct_over_window": round(growth, 2),
            "rss_at_end_of_each_life_mb": [round(y, 1) for y in life_ends],
            "rss_slope_within_lives_mb_per_min": [round(x, 2) for x in life_slopes],
        }
    return out


def lag_numbers(soak: Soak) -> dict[str, Any]:
    """The largest lag, and the largest in the run's second half (while producing)."""
    lags = [
        (float(s["t_s"]), int(s["lag_records"])) for s in soak.samples if s["lag_records"] != ""
    ]
    producing = [(t, lag) for t, lag in lags if t <= soak.args.minutes * 60]
    half = soak.args.minutes * 30
    return {
        "lag_max": max((lag for _, lag in producing), default=None),
        "lag_max_first_half": max((lag for t, lag in producing if t < half), default=None),
        "lag_max_second_half": max((lag for t, lag in producing if t >= half), default=None),
        "lag_end": lags[-1][1] if lags else None,
    }


# -- outputs -----------------------------------------------------------------------------


def write_csv(path: Path, rows: Sequence[dict[str, Any]], fields: Sequence[str]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields))
        writer.writeheader()
        writer.writerows(rows)


_COLOURS = ("#1565c0", "#e65100", "#2e7d32", "#6a1b9a")


def rates(samples: Sequence[dict[str, Any]], window: int = 6) -> list[dict[str, Any]]:
    """Per sample time: orders produced and landed a second, means over ``window`` samples.

    Landed is summed over the processes (the sinks commit once an epoch, so a single
    sample's rate jumps between zero and twice the mean).
    """
    by_t: dict[float, dict[str, float]] = {}
    for s in samples:
        row = by_t.setdefault(float(s["t_s"]), {"produced": float(s["produced"]), "landed": 0})
        if s["landed_per_s"] != "":
            row["landed"] += float(s["landed_per_s"])
    times = sorted(by_t)
    out = []
    for i, t in enumerate(times):
        first = times[max(0, i - window)]
        span = t - first
        landed = [by_t[x]["landed"] for x in times[max(0, i - window + 1) : i + 1]]
        out.append(
            {
                "t_s": t,
                "process": "all",
                "produced_per_s": (by_t[t]["produced"] - by_t[first]["produced"]) / span
                if span
                else "",
                "landed_per_s": sum(landed) / len(landed),
            }
        )
    return out


def svg_plot(
    samples: Sequence[dict[str, Any]],
    events: Sequence[dict[str, Any]],
    processes: int,
    title: str,
) -> str:
    """Four panels over time (RSS, lag, rows/s, open files and threads), as SVG."""
    samples = [*samples, *rates(samples)]
    width, panel_h, left, top, gap = 900, 150, 70, 40, 40
    panels = [
        ("RSS per process (MB)", [("rss_mb", p, f"process {p}") for p in range(processes)]),
        ("consumer lag (records)", [("lag_records", 0, "lag")]),
        (
            "orders a second (30 s means)",
            [("produced_per_s", "all", "produced"), ("landed_per_s", "all", "landed")],
        ),
        (
            "open files / threads",
            [("open_files", p, f"files {p}") for p in range(processes)]
            + [("threads", p, f"threads {p}") for p in range(processes)],
        ),
    ]
    t_end = max((float(s["t_s"]) for s in samples), default=1.0) or 1.0
    height = top + len(panels) * (panel_h + gap) + 20
    plot_w = width - left - 150
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="20" font-size="14">{title}</text>',
    ]
    kills = [float(e["t_s"]) for e in events if e["event"].startswith("SIGKILL")]
    for i, (label, series) in enumerate(panels):
        y0 = top + i * (panel_h + gap)
        data = []
        for column, proc, name in series:
            pts = [
                (float(s["t_s"]), float(s[column]))
                for s in samples
                if str(s["process"]) == str(proc) and s.get(column, "") != ""
            ]
            data.append((name, pts))
        y_max = max((y for _, pts in data for _, y in pts), default=1.0) * 1.1 or 1.0
        parts.append(f'<text x="{left}" y="{y0 - 6}" font-weight="bold">{label}</text>')
        parts.append(
            f'<rect x="{left}" y="{y0}" width="{plot_w}" height="{panel_h}" '
            'fill="none" stroke="#999"/>'
        )
        for frac in (0, 0.5, 1):
            y = y0 + panel_h - frac * panel_h
            parts.append(
                f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{y_max * frac:,.0f}</text>'
            )
        for t in kills:
            x = left + t / t_end * plot_w
            parts.append(
                f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + panel_h}" '
                'stroke="#d32f2f" stroke-dasharray="3,3"/>'
            )
        for j, (name, pts) in enumerate(data):
            colour = _COLOURS[j % len(_COLOURS)]
            dash = ' stroke-dasharray="4,2"' if name.startswith("threads") else ""
            coords = " ".join(
                f"{left + t / t_end * plot_w:.1f},{y0 + panel_h - y / y_max * panel_h:.1f}"
                for t, y in pts
            )
            parts.append(
                f'<polyline points="{coords}" fill="none" stroke="{colour}" '
                f'stroke-width="1.2"{dash}/>'
            )
            ly = y0 + 12 + j * 14
            parts.append(
                f'<line x1="{left + plot_w + 10}" y1="{ly - 4}" x2="{left + plot_w + 30}" '
                f'y2="{ly - 4}" stroke="{colour}"{dash}/>'
            )
            parts.append(f'<text x="{left + plot_w + 34}" y="{ly}">{name}</text>')
    axis_y = top + len(panels) * (panel_h + gap) - gap + 14
    for k in range(6):
        t = t_end * k / 5
        x = left + k / 5 * plot_w
        parts.append(f'<text x="{x:.1f}" y="{axis_y}" text-anchor="middle">{t / 60:.1f} min</text>')
    parts.append(f'<text x="{left + plot_w + 10}" y="{axis_y}" fill="#d32f2f">- - SIGKILL</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


# -- main --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30.0, help="how long to produce (30)")
    p.add_argument("--rate", type=float, default=1000.0, help="orders produced per second")
    p.add_argument("--partitions", type=int, default=4, help="partitions of the topic (4)")
    p.add_argument("--processes", type=int, default=2, help="processes of the cluster (2)")
    p.add_argument("--snapshot-s", type=float, default=10.0, help="seconds between snapshots")
    p.add_argument("--kill-every-s", type=float, default=300.0, help="SIGKILL period; 0: never")
    p.add_argument("--sample-s", type=float, default=5.0, help="seconds between samples")
    p.add_argument("--settle-s", type=float, default=60.0, help="warm-up after each start")
    p.add_argument("--rss-window-min", type=float, default=20.0, help="RSS slope window")
    p.add_argument("--max-rss-growth", type=float, default=2.0, help="RSS growth limit, %%")
    p.add_argument("--dedup-window-s", type=float, default=300.0, help="THALWEG_DEDUP_WINDOW")
    p.add_argument(
        "--keep-snapshots", type=int, help="THALWEG_ICEBERG_KEEP_SNAPSHOTS (the flow's 100)"
    )
    p.add_argument("--drain-timeout-s", type=float, default=600.0, help="catch-up limit")
    p.add_argument("--bootstrap", help="a running broker (default: start Apache Kafka)")
    p.add_argument("--topic", help="an existing topic to use (default: create soak-<time>)")
    p.add_argument("--out", type=Path, default=Path("soak-out"), help="where results go")
    p.add_argument("--work", type=Path, help="pods' directories (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument(
        "--plot",
        action="store_true",
        help="only recompute the memory numbers and redraw soak.svg from --out",
    )
    return p.parse_args(argv)


def redraw(out: Path) -> int:
    """Recompute the memory numbers and redraw ``soak.svg`` from the CSVs in ``out``."""
    missing = [n for n in ("samples.csv", "events.csv", "summary.json") if not (out / n).exists()]
    if missing:
        print(
            f"--plot redraws an earlier run's results: {out} has no {', '.join(missing)}; "
            "run without --plot to soak",
            file=sys.stderr,
        )
        return 2
    with (out / "samples.csv").open() as f:
        samples = list(csv.DictReader(f))
    with (out / "events.csv").open() as f:
        events = list(csv.DictReader(f))
    summary = json.loads((out / "summary.json").read_text())
    args = parse_args(["--minutes", str(summary["minutes"])])
    summary["memory"] = memory_numbers(
        samples, events, summary["processes"], rss_window(args), summary.get("settle_s", 60.0)
    )
    growths = [
        v["rss_growth_pct_over_window"] for k, v in summary["memory"].items() if k != "window_s"
    ]
    summary["rss_ok"] = all(abs(g) <= summary.get("max_rss_growth_pct", 2.0) for g in growths)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "soak.svg").write_text(svg_plot(samples, events, summary["processes"], _title(summary)))
    return 0


def rss_window(args: argparse.Namespace) -> float:
    """The RSS slope's window: ``--rss-window-min``, or the last two thirds of a shorter run."""
    return float(min(args.rss_window_min * 60, args.minutes * 40))


def _title(summary: dict[str, Any]) -> str:
    return (
        f"orders flow, {summary['processes']} processes, {summary['rate_per_s']:g} orders/s, "
        f"snapshot {summary['snapshot_s']:g} s, SIGKILL every {summary['kill_every_s']:g} s"
    )


def _stop_on_sigterm(signum: int, _frame: object) -> None:
    """End the run as Ctrl-C does, so the pods and the broker are stopped on the way out."""
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.plot:
        return redraw(args.out)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "samples.csv").unlink(missing_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="thalweg-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        with broker(args.bootstrap, work / "kafka") as bootstrap:
            topic = args.topic or f"soak-{int(time.time())}"
            if not args.topic:
                create_topic(bootstrap, topic, args.partitions)
            soak = Soak(args, bootstrap, topic, work)
            ran = soak.run()
            checks = check_tables(soak.pods, ran["produced"])
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    memory = memory_numbers(
        soak.samples, soak.events, args.processes, rss_window(args), args.settle_s
    )
    lag = lag_numbers(soak)
    growths = [
        v["rss_growth_pct_over_window"] for k, v in memory.items() if k.startswith("process_")
    ]
    summary = {
        "minutes": args.minutes,
        "rate_per_s": args.rate,
        "processes": args.processes,
        "partitions": args.partitions,
        "snapshot_s": args.snapshot_s,
        "kill_every_s": args.kill_every_s,
        "settle_s": args.settle_s,
        "dedup_window_s": args.dedup_window_s,
        "keep_snapshots": args.keep_snapshots,
        "max_rss_growth_pct": args.max_rss_growth,
        "kills": sum(1 for e in soak.events if e["event"].startswith("SIGKILL")),
        "drained_s": ran["drained_s"],
        "tables": checks,
        "memory": memory,
        "lag": lag,
        "rss_ok": all(abs(g) <= args.max_rss_growth for g in growths),
        "lag_ok": ran["drained_s"] is not None,
        "exactly_once": checks["exactly_once"],
    }
    write_csv(args.out / "samples.csv", soak.samples, SAMPLE_FIELDS)
    write_csv(args.out / "events.csv", soak.events, ("t_s", "event"))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    title = _title(summary)
    (args.out / "soak.svg").write_text(svg_plot(soak.samples, soak.events, args.processes, title))
    print(json.dumps(summary, indent=2))
    ok = summary["exactly_once"] and summary["rss_ok"] and summary["lag_ok"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
