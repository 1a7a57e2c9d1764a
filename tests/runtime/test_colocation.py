"""Sink shards sit on the worker that reads their source partitions: no batch changes worker.

Bytewax 0.21.1 places the partition at index ``i`` of a step's sorted listing on worker
``π(i mod W)``, for sources and sinks alike; the sinks route the source partition of
index ``i`` to shard ``i mod shards`` (``thalweg_bytewax.runtime.parts.route``). These
tests run a real flow with two workers in one process and with two processes and read
where each partition was read and where its rows were staged.
"""

from __future__ import annotations

import collections
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import cluster_addresses
from thalweg_bytewax.connectors.kafka import KafkaSink, KafkaSource
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.runtime.parts import announce_listing, route, stable_route
from thalweg_bytewax.testing import produce

ROOT = Path(__file__).resolve().parents[2]


def test_an_announced_partition_routes_to_its_sorted_index_modulo_shards() -> None:
    keys = [f"colo-a:{p}" for p in range(12)]
    announce_listing(keys)
    ordered = sorted(keys)  # "colo-a:10" sorts before "colo-a:2", as Bytewax sorts them
    assert [route(k, 4) for k in ordered] == [i % 4 for i in range(12)]
    assert route("colo-a:10", 4) == 2  # noqa: PLR2004 - index 2 of the sorted listing


def test_a_key_no_source_announced_routes_by_its_stable_hash() -> None:
    key = "colo-never-listed:3"
    assert [route(key, n) for n in (1, 2, 7, 16)] == [stable_route(key, n) for n in (1, 2, 7, 16)]


def test_a_newer_listing_of_the_same_keys_takes_over() -> None:
    announce_listing(["colo-b:0", "colo-b:1"])
    announce_listing(["colo-b:0", "colo-b:1", "colo-b:00"])
    assert [route(k, 3) for k in ("colo-b:0", "colo-b:00", "colo-b:1")] == [0, 1, 2]


def test_the_kafka_source_announces_its_listing(
    kafka_bootstrap: str, make_topic: Callable[[], str]
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"x", "partition": p} for p in range(4)])
    listed = KafkaSource([kafka_bootstrap], [topic], tail=False).list_parts()
    assert len(listed) == 4  # noqa: PLR2004 - the mock cluster's partitions
    assert [route(k, 2) for k in sorted(listed)] == [0, 1, 0, 1]


def test_the_kafka_sink_keeps_hash_routing_for_announced_partitions() -> None:
    # Its shards read back from where their own last snapshot ended: a source
    # partition must keep its shard when the listing changes between runs.
    keys = announce_listing([f"colo-k:{p}" for p in range(12)])
    sink = KafkaSink(["127.0.0.1:9"], "out", shards=4)
    assert [sink.part_fn(k) for k in keys] == [stable_route(k, 4) for k in keys]
    assert [sink.part_fn(k) for k in keys] != [route(k, 4) for k in keys]


def _run(root: Path, partitions: int, shards: int, *, workers: int, processes: int) -> None:
    spec = f"tests.runtime.colocation_flow:build_flow({str(root)!r}, {partitions}, {shards})"
    base = [sys.executable, "-m", "bytewax.run", spec, "-w", str(workers)]
    if processes == 1:
        done = subprocess.run(base, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        return
    addresses = cluster_addresses(processes)
    procs = [
        subprocess.Popen(
            [*base, "-i", str(i), "-a", addresses],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    errors = [proc.communicate(timeout=120)[1] for proc in procs]
    for proc, err in zip(procs, errors, strict=True):
        assert proc.returncode == 0, err[-3000:]


def _moved_keys(root: Path) -> set[str]:
    """The source partitions with a batch staged on another worker than the one reading it."""
    read: dict[str, tuple[str, str]] = {}
    staged: dict[str, set[tuple[str, str]]] = collections.defaultdict(set)
    for log in root.glob("where-*.log"):
        for line in log.read_text().splitlines():
            kind, key, pid, thread = line.split(" ")
            if kind == "read":
                read[key] = (pid, thread)
            else:
                staged[key].add((pid, thread))
    assert set(staged) == set(read), "every source partition's rows reached the lane"
    return {key for key, where in staged.items() if where != {read[key]}}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("workers", "processes", "partitions", "shards"),
    [(2, 1, 6, 4), (1, 2, 5, 2), (2, 2, 9, 8), (3, 1, 20, 16), (2, 1, 6, 3)],
    ids=["w2", "2p", "2p-w2", "w3-16-shards", "w2-3-shards"],
)
def test_no_batch_changes_worker_for_any_worker_count_up_to_the_shards(
    tmp_path: Path, workers: int, processes: int, partitions: int, shards: int
) -> None:
    _run(tmp_path, partitions, shards, workers=workers, processes=processes)
    assert _moved_keys(tmp_path) == set()
    assert read_lane(tmp_path / "lane").num_rows == 40 * partitions


@pytest.mark.slow
def test_fewer_shards_than_workers_hand_some_batches_over(tmp_path: Path) -> None:
    # One shard sits on the first of three workers: what the others read moves to it.
    _run(tmp_path, 6, 1, workers=3, processes=1)
    assert _moved_keys(tmp_path)
    assert read_lane(tmp_path / "lane").num_rows == 40 * 6
