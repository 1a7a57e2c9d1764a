"""Every source partition's stateful steps and sink shard run on the worker that reads it.

Bytewax 0.21.1 runs a state key on worker ``SipHash-1-3(key) mod W``; thalweg lists each
source partition on the worker its routing key hashes to, keeps ``dedup`` / ``validate``
state under that key and lists sink shard ``s`` on worker ``s mod W``
(``thalweg_bytewax.runtime.placement``). The fast tests check the rules on threads named
as the engine names its workers; the slow ones run the bundled orders flow at three
workers and at two processes and read what each process handed over or pickled.
"""

from __future__ import annotations

import ctypes
import json
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pytest
from bytewax.recovery import init_db_dir
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

from tests.helpers import cluster_addresses
from thalweg_bytewax.observability.meters import Metrics
from thalweg_bytewax.runtime import placement
from thalweg_bytewax.runtime.crossings import crossings
from thalweg_bytewax.runtime.parts import announce_listing, listed_on_this_worker, route
from thalweg_bytewax.runtime.placement import (
    declare_cluster,
    partition_of_routing_key,
    routing_key,
    state_worker,
)

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


@pytest.fixture
def three_workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(placement, "_declared", None)
    monkeypatch.setattr(placement, "_run_size", 0)
    declare_cluster(workers_per_process=3)
    yield


def _on_worker(index: int, call: Callable[[], T]) -> T:
    """Run ``call`` on a thread the OS names as the engine names worker ``index``."""
    out: list[T] = []

    def body() -> None:
        libc = ctypes.CDLL(None)
        libc.prctl(15, f"timely:work-{index}".encode(), 0, 0, 0)  # PR_SET_NAME
        out.append(call())

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    return out[0]


@pytest.mark.parametrize("workers", [2, 3, 4, 5, 6, 8, 12, 16])
def test_a_topics_partitions_spread_evenly_over_any_worker_count_dividing_5040(
    workers: int,
) -> None:
    keys = [f"placed:{p}" for p in range(2 * workers)]
    placed = sorted(state_worker(routing_key(k), workers) for k in keys)
    assert placed == sorted(list(range(workers)) * 2)


def test_a_routing_key_is_a_pure_function_of_its_partition_and_cuts_back_to_it() -> None:
    routed = routing_key("orders:3")
    routing_key.cache_clear()
    assert routing_key("orders:3") == routed
    assert routed.startswith("orders:3@")
    assert partition_of_routing_key(routed) == "orders:3"


def test_each_worker_lists_only_the_partitions_it_reads(three_workers: None) -> None:
    keys = [f"listed:{p}" for p in range(7)]
    lists = [_on_worker(w, lambda: announce_listing(keys)) for w in range(3)]
    assert sorted(k for listed in lists for k in listed) == sorted(keys)
    for w, listed in enumerate(lists):
        assert all(state_worker(routing_key(k), 3) == w for k in listed)


def test_off_a_worker_thread_every_partition_is_listed(three_workers: None) -> None:
    keys = [f"all:{p}" for p in range(7)]
    assert announce_listing(keys) == keys


def test_each_worker_lists_the_sink_shards_s_mod_w(three_workers: None) -> None:
    names = [f"shard-{s:03d}" for s in range(8)]
    assert _on_worker(1, lambda: listed_on_this_worker(names)) == [
        "shard-001",
        "shard-004",
        "shard-007",
    ]


def test_pickling_a_batch_counts_its_rows_as_records_when_they_carry_locators() -> None:
    before = crossings().as_dict()
    located = pa.record_batch({"_twg_source_offset": [1, 2, 3], "x": [1, 2, 3]})
    partial = pa.record_batch({"status": ["a", "b"], "n": [4, 5]})
    assert pickle.loads(pickle.dumps(located)).equals(located)
    pickle.dumps(partial)
    after = crossings().as_dict()
    assert after["batches_pickled"] - before["batches_pickled"] == 2  # noqa: PLR2004
    assert after["records_pickled"] - before["records_pickled"] == 3  # noqa: PLR2004
    assert after["other_rows_pickled"] - before["other_rows_pickled"] == 2  # noqa: PLR2004


def test_stats_and_metrics_serve_the_crossings() -> None:
    pickle.dumps(pa.record_batch({"_twg_source_offset": [1]}))
    reader = InMemoryMetricReader()
    metrics = Metrics([reader])
    assert metrics.stats()["crossings"] == crossings().as_dict()
    data = reader.get_metrics_data()
    assert data is not None
    points = {
        dict(p.attributes or {})["kind"]: p.value
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "thalweg_crossing_records_total"
        for p in m.data.data_points
        if isinstance(p, NumberDataPoint)
    }
    assert points["pickled"] == crossings().records >= 1


# -- the orders flow in a cluster ------------------------------------------------------------


def _run_orders(root: Path, count: int, *, workers: int, processes: int) -> list[dict[str, int]]:
    spec = f"tests.runtime.orders_crossings_flow:build_flow({str(root)!r}, {count})"
    base = [sys.executable, "-m", "bytewax.run", spec, "-w", str(workers)]
    addresses = cluster_addresses(processes)
    cmds = (
        [base]
        if processes == 1
        else [[*base, "-i", str(i), "-a", addresses] for i in range(processes)]
    )
    procs = [
        subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        for cmd in cmds
    ]
    errors = [proc.communicate(timeout=300)[1] for proc in procs]
    for proc, err in zip(procs, errors, strict=True):
        assert proc.returncode == 0, err[-3000:]
    return [json.loads(p.read_text()) for p in sorted(root.glob("crossings-*.json"))]


@pytest.mark.slow
def test_the_orders_flow_at_three_workers_hands_no_record_to_another_worker(
    tmp_path: Path,
) -> None:
    (counts,) = _run_orders(tmp_path, 4000, workers=3, processes=1)
    assert counts["records_read"] == 4000  # noqa: PLR2004
    assert counts["records_handed_over"] == 0
    assert counts["records_pickled"] == 0


@pytest.mark.slow
def test_the_orders_flow_at_two_processes_pickles_no_record(tmp_path: Path) -> None:
    counts = _run_orders(tmp_path, 4000, workers=1, processes=2)
    assert sum(c["records_read"] for c in counts) == 4000  # noqa: PLR2004
    assert all(c["records_read"] > 0 for c in counts), "both processes read"
    assert [c["records_pickled"] for c in counts] == [0, 0]
    # Only the revenue window's partials and results cross: a few rows a batch.
    assert sum(c["other_rows_pickled"] for c in counts) < 4000 / 4


def test_a_run_of_one_worker_stages_every_partition_in_its_first_shard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One shard a worker: an Iceberg or PostgreSQL sink commits once an epoch.
    monkeypatch.setattr(placement, "_declared", None)
    monkeypatch.setattr(placement, "_run_size", 0)
    declare_cluster(workers_per_process=1)
    keys = announce_listing([f"single:{p}" for p in range(6)])
    assert [route(k, 4) for k in keys] == [0] * 6


def _run_rescale(root: Path, upto: int, *, workers: int, processes: int) -> list[dict[str, int]]:
    spec = f"tests.runtime.rescale_flow:build_flow({str(root)!r}, {upto})"
    recovery = ["-r", str(root / "recovery"), "-s", "0", "-b", "0"]
    base = [sys.executable, "-m", "bytewax.run", spec, *recovery, "-w", str(workers)]
    addresses = cluster_addresses(processes)
    cmds = (
        [base]
        if processes == 1
        else [[*base, "-i", str(i), "-a", addresses] for i in range(processes)]
    )
    for old in root.glob("crossings-*.json"):
        old.unlink()
    procs = [
        subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        for cmd in cmds
    ]
    errors = [proc.communicate(timeout=120)[1] for proc in procs]
    for proc, err in zip(procs, errors, strict=True):
        assert proc.returncode == 0, err[-3000:]
    return [json.loads(p.read_text()) for p in sorted(root.glob("crossings-*.json"))]


def _totals(root: Path) -> dict[str, int]:
    totals: dict[str, int] = {}
    for log in root.glob("totals-*.log"):
        for line in log.read_text().splitlines():
            key, total = line.split(" ")
            totals[key] = max(totals.get(key, 0), int(total))
    return totals


@pytest.mark.slow
def test_keyed_state_is_found_after_a_resume_at_another_worker_count(tmp_path: Path) -> None:
    (tmp_path / "recovery").mkdir()
    init_db_dir(tmp_path / "recovery", 2)
    keys = [f"rescale:{p}" for p in range(6)]
    # (batches, workers, processes): two processes, three workers, four processes, one.
    runs = [(3, 1, 2), (6, 3, 1), (9, 1, 4), (12, 1, 1)]
    for upto, workers, processes in runs:
        counts = _run_rescale(tmp_path, upto, workers=workers, processes=processes)
        # Each partition's count goes on from the last run's, and the batch each resumed
        # partition sent again was dropped: dedup's state and the count's were found.
        assert _totals(tmp_path) == dict.fromkeys(keys, 10 * upto)
        assert sum(c["records_pickled"] + c["records_handed_over"] for c in counts) == 0
