"""Long-running partitions do not accumulate Python objects as they poll and write.

A source partition polls for days and a sink partition snapshots every epoch: anything
kept per poll, per batch or per snapshot (a list that is only appended to, a future or
writer never released, a cache keyed by something that changes) grows without bound.
Each test drives one partition directly through a warm-up phase and then through
hundreds of further polls or batches, and compares the live objects, and the objects
the partition holds, before and after that second phase: they may move by a few objects
(interpreter and library caches settle), never by one per poll or batch.
"""

from __future__ import annotations

import abc
import gc
import threading
import time
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute

from tests.helpers import raw_values
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.testing import produce

STEPS = 400
"""Polls or batches in each measured phase."""
SLACK = 32
"""Allowed growth over a measured phase, in objects: far below one per step."""
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, threading.Thread)
"""Where a walk of a partition's state stops: shared program structure, not state."""


def live_objects() -> Counter[str]:
    """Live gc-tracked objects by type name, after a full collection.

    The ``isinstance`` caches of abstract base classes are cleared first (as CPython's
    own leak hunting does): they fill with weak references whenever a type is first
    checked against an ABC after any ``register`` call, which is bounded but not tied to
    a warm-up phase.
    """
    for obj in gc.get_objects():
        if isinstance(obj, abc.ABCMeta):
            obj._abc_caches_clear()  # type: ignore[attr-defined]
    gc.collect()
    gc.collect()
    counts: Counter[str] = Counter()
    for obj in gc.get_objects():
        counts[type(obj).__qualname__] += 1
    return counts


def reachable_objects(root: object) -> int:
    """Objects reachable from ``root``: the state a partition holds, however stored.

    ``gc.get_objects`` misses what the collector does not track (a dict or tuple of
    atoms, strings, bytes); following references from the partition finds those too.
    """
    seen = {id(root)}
    stack = [root]
    while stack:
        for ref in gc.get_referents(stack.pop()):
            if id(ref) not in seen and not isinstance(ref, _OPAQUE):
                seen.add(id(ref))
                stack.append(ref)
    return len(seen)


def assert_no_growth(part: object, step: Callable[[int], int], steps: int) -> None:
    """Run ``step(steps)`` (polls or batches of ``part``); assert nothing piled up."""
    before, held_before = live_objects(), reachable_objects(part)
    done = step(steps)
    after, held_after = live_objects(), reachable_objects(part)
    assert done == steps, f"only {done} of {steps} steps ran"
    grown = after - before
    total = sum(after.values()) - sum(before.values())
    assert total <= SLACK, f"{total} more objects after {steps} steps: {grown.most_common(8)}"
    # No one type may grow much either (a leak could hide behind a cache settling).
    assert all(n <= SLACK for n in grown.values()), grown.most_common(8)
    held = held_after - held_before
    assert held <= SLACK, f"the partition holds {held} more objects after {steps} steps"


def test_kafka_source_partition_does_not_grow_while_polling(
    kafka_bootstrap: str, make_topic: Callable[[], str]
) -> None:
    topic = make_topic()
    total = 20_000
    produce(
        kafka_bootstrap,
        topic,
        ({"value": b"%d" % i, "key": b"k", "partition": 0} for i in range(total)),
    )
    source = KafkaSource([kafka_bootstrap], [topic], tail=False, batch_size=25)
    part = source.build_part("in", f"{topic}:0", None)
    seen = 0

    def poll(n: int) -> int:
        nonlocal seen
        polls = 0
        deadline = time.monotonic() + 60  # a stuck broker fails the test, not the suite
        while polls < n and time.monotonic() < deadline:
            try:
                batches = part.next_batch()
            except StopIteration:
                break
            if batches:
                polls += 1
                seen += sum(b.num_rows for _, b in batches)
                part.snapshot()
            else:
                time.sleep(0.001)  # nothing fetched yet; the runtime would wait too
            del batches
        return polls

    try:
        poll(100)  # warm-up: connections, fetch buffers, lazily filled caches
        assert_no_growth(part, poll, STEPS)
        assert part.snapshot()["next_offset"] == seen  # the offset after every record polled
    finally:
        part.close()


def _batch(topic: str, partition: int, first: int, n: int) -> pa.RecordBatch:
    values = [b"v%d" % o for o in range(first, first + n)]
    return raw_values(
        values, topic=topic, partition=partition, first=first, keys=[b"k"] * n, cluster="c"
    )


def test_parquet_sink_partition_does_not_grow_across_batches_and_snapshots(
    tmp_path: Path,
) -> None:
    lane = tmp_path / "lane"
    # Small row groups and files, so that row groups are written and files closed often.
    sink = ParquetSink(lane, shards=1, row_group_rows=200, max_file_rows=2_000)
    part = sink.build_part("out", sink.list_parts()[0], None)
    rows_per_batch = 25
    next_offset = {0: 0, 1: 0}

    def write(n_batches: int, snapshot_every: int = 10) -> int:
        for i in range(n_batches):
            partition = i % 2  # two topic-partitions in one sink partition
            first = next_offset[partition]
            part.write_batch([_batch("t", partition, first, rows_per_batch)])
            next_offset[partition] += rows_per_batch
            if (i + 1) % snapshot_every == 0:
                part.snapshot()
        return n_batches

    try:
        write(100)  # warm-up: writer pool threads, column option cache, first files
        assert_no_growth(part, write, STEPS)
        assert part.snapshot() == {"t:0": next_offset[0], "t:1": next_offset[1]}
    finally:
        part.close()
    table = read_lane(lane)
    for p in (0, 1):
        rows = table.filter(pa.compute.equal(table["_twg_source_partition"], p))
        assert sorted(rows["_twg_source_offset"].to_pylist()) == list(range(next_offset[p]))
