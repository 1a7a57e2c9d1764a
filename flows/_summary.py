"""A sink that counts what passed through and prints a short summary on a clean finish."""

from __future__ import annotations

import sys
from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from typing_extensions import override

__all__ = ["SummarySink"]


class _SummaryPartition(StatelessSinkPartition[tuple[str, pa.RecordBatch]]):
    def __init__(
        self,
        title: str,
        worker_index: int,
        worker_count: int,
        *,
        per_key: bool,
        count_by: str | None,
    ) -> None:
        self._title = title
        self._per_key = per_key
        self._count_by = count_by
        self._by_value: dict[str, int] = defaultdict(int)
        self._worker = worker_index
        self._workers = worker_count
        self._rows: dict[str, int] = defaultdict(int)
        self._bytes = 0

    @override
    def write_batch(self, items: list[tuple[str, pa.RecordBatch]]) -> None:
        for key, batch in items:
            self._rows[key] += batch.num_rows
            self._bytes += batch.nbytes
            if self._count_by and self._count_by in batch.schema.names:
                counts = pc.value_counts(batch.column(self._count_by))
                for entry in counts.to_pylist():
                    self._by_value[str(entry["values"])] += entry["counts"]

    @override
    def close(self) -> None:
        if not self._rows:
            return
        total = sum(self._rows.values())
        who = f" (worker {self._worker + 1}/{self._workers})" if self._workers > 1 else ""
        by = ""
        if self._by_value:
            by = " (" + ", ".join(f"{v} {n:,}" for v, n in sorted(self._by_value.items())) + ")"
        lines = [f"{self._title}{who}: {total:,} records{by}, {self._bytes / 1e6:,.1f} MB"]
        if self._per_key:
            lines += [f"  {key}: {rows:,}" for key, rows in sorted(self._rows.items())]
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()


class SummarySink(DynamicSink[tuple[str, pa.RecordBatch]]):
    """Count keyed batches per key and print the totals when the flow ends cleanly.

    Args:
        title: The first words of the summary line.
        per_key: Also print one line per key (source partition).
        count_by: A column whose values are counted too (e.g. the DLQ ``reason``).
    """

    def __init__(self, title: str, *, per_key: bool = True, count_by: str | None = None) -> None:
        self._title = title
        self._per_key = per_key
        self._count_by = count_by

    @override
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _SummaryPartition:
        return _SummaryPartition(
            self._title, worker_index, worker_count, per_key=self._per_key, count_by=self._count_by
        )
