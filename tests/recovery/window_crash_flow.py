"""A windowed flow for the SIGKILL test: two paced source partitions, window_agg, SQLite upserts.

Run as ``python -m bytewax.run tests.recovery.window_crash_flow:flow``. Settings by
environment: ``WINDOW_TEST_DB`` (the SQLite file the sink upserts into) and
``WINDOW_TEST_KILL`` (a marker file: when it does not exist yet, partition 0 creates it and
SIGKILLs the process after emitting batch ``KILL_AT``).

The data is generated from a seed, so a test can recompute it: :func:`batches`.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
from datetime import UTC, datetime, timedelta

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from typing_extensions import override

import thalweg_bytewax.operators as twg

T0 = datetime(2024, 5, 1, tzinfo=UTC)
PARTITIONS = 2
BATCHES = 40
ROWS = 50
KILL_AT = 20
LATE_EVERY = 7  # every 7th batch carries one record ten minutes behind: surely late
STATUSES = ("NEW", "PAID", "SHIPPED")
WINDOW = timedelta(seconds=10)
STEP_S = 5  # event time a batch spans
LATENESS = timedelta(seconds=30)  # 6 batches: more than the partitions' skew, so lateness is
# decided the same way in every run


def batches(partition: int) -> list[tuple[pa.RecordBatch, int]]:
    """Partition ``partition``'s batches and, for each, how many of its records are late."""
    rng = random.Random(f"window-crash-{partition}")
    out = []
    for i in range(BATCHES):
        times = [T0 + timedelta(seconds=STEP_S * (i + j / ROWS)) for j in range(ROWS)]
        late = int(i > 0 and i % LATE_EVERY == 0)
        if late:
            times[0] = T0 + timedelta(seconds=STEP_S * i - 600)
        out.append(
            (
                pa.record_batch(
                    {
                        "created_at": pa.array(times, pa.timestamp("ms", tz="UTC")),
                        "status": [rng.choice(STATUSES) for _ in range(ROWS)],
                        "amount": pa.array([rng.randint(1, 100) for _ in range(ROWS)], pa.int64()),
                    }
                ),
                late,
            )
        )
    return out


class _Part(StatefulSourcePartition[tuple[str, pa.RecordBatch], int]):
    def __init__(self, partition: int, next_batch: int) -> None:
        self._partition = partition
        self._next = next_batch
        self._batches = batches(partition)
        self._awake = datetime.now(UTC)

    @override
    def next_batch(self) -> list[tuple[str, pa.RecordBatch]]:
        if self._next >= BATCHES:
            raise StopIteration
        batch = self._batches[self._next][0]
        self._next += 1
        self._awake = datetime.now(UTC) + timedelta(milliseconds=120)
        marker = os.environ.get("WINDOW_TEST_KILL")
        if self._partition == 0 and self._next == KILL_AT + 1 and marker:
            if not os.path.exists(marker):
                open(marker, "w").close()  # noqa: PTH123, SIM115 - a marker, closed at once
                os.kill(os.getpid(), signal.SIGKILL)
        return [(f"orders:{self._partition}", batch)]

    @override
    def next_awake(self) -> datetime | None:
        return self._awake

    @override
    def snapshot(self) -> int:
        return self._next


class _Source(FixedPartitionedSource[tuple[str, pa.RecordBatch], int]):
    @override
    def list_parts(self) -> list[str]:
        return [f"orders:{p}" for p in range(PARTITIONS)]

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> _Part:
        return _Part(int(for_part.split(":")[1]), resume_state or 0)


class _UpsertPart(StatelessSinkPartition[tuple[str, pa.RecordBatch]]):
    """Upserts windows by (status, window_start), late rows by (status, source, late_seq).

    Durable per write (SQLite commit).
    """

    def __init__(self, path: str) -> None:
        self._db = sqlite3.connect(path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS windows (status TEXT, window_start TEXT, revenue INT,"
            " orders INT, PRIMARY KEY (status, window_start))"
        )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS late (status TEXT, source TEXT, late_seq INT,"
            " event_time_min TEXT, n INT, PRIMARY KEY (status, source, late_seq))"
        )
        self._db.commit()

    @override
    def write_batch(self, items: list[tuple[str, pa.RecordBatch]]) -> None:
        for kind, batch in items:
            for r in batch.to_pylist():
                if kind == "windows":
                    self._db.execute(
                        "INSERT INTO windows VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET"
                        " revenue = excluded.revenue, orders = excluded.orders",
                        (r["status"], r["window_start"].isoformat(), r["revenue"], r["orders"]),
                    )
                else:
                    self._db.execute(
                        "INSERT INTO late VALUES (?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET"
                        " event_time_min = excluded.event_time_min, n = excluded.n",
                        (
                            r["status"],
                            r["source"],
                            r["late_seq"],
                            r["event_time_min"].isoformat(),
                            r["late_records"],
                        ),
                    )
        self._db.commit()

    @override
    def close(self) -> None:
        self._db.close()


class _UpsertSink(DynamicSink[tuple[str, pa.RecordBatch]]):
    def __init__(self, path: str) -> None:
        self._path = path

    @override
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _UpsertPart:
        return _UpsertPart(self._path)


flow = Dataflow("window_crash")
_up = op.input("orders", flow, _Source())
_out = twg.window_agg(
    "revenue",
    _up,
    window=twg.Tumbling(WINDOW),
    aggs={"revenue": ("sum", "amount"), "orders": ("count", "*")},
    group_by=["status"],
    time_column="created_at",
    allowed_lateness=LATENESS,
)
_tagged = op.merge(
    "tagged",
    op.map("tag_windows", _out.windows, lambda kv: ("windows", kv[1])),
    op.map("tag_late", _out.late, lambda kv: ("late", kv[1])),
)
op.output("db", _tagged, _UpsertSink(os.environ.get("WINDOW_TEST_DB", "windows.db")))
