"""The end-of-run summary of a bounded flow: streams counted in the flow, tables read back.

:class:`RunReport` hands out :class:`SummarySink` s that count what passes through the
streams they are attached to (records, and values of one column such as the DLQ
``reason``). When the process exits after a clean finish — every summary partition
closed, which Bytewax does only then — it reads back the raw lane's record count and
each table's and lane's row count (cheap reads: Parquet footers, the Iceberg snapshot
summary, one ``count(*)``) and prints::

    orders: 20,000 records read in 3.1 s (6,452 records/s)
      raw lane thalweg-data/raw: 20,000 records (+20,000)
      rejected: 40 (decode 20, dq 20)
      audited: 19,980 (fail 20, pass 19,960)
      table sales.orders (iceberg thalweg-data/warehouse): 19,960 rows (+19,960)
      lane thalweg-data/clean (parquet): 19,960 rows (+19,960)

``thalweg batch`` prints the same lines itself once its run returns (``at_exit=False``).

A run that landed nothing new (resumed at the end of its input, or replaying what the
lanes already hold) prints one line saying so and where the lanes stand. Printing at
exit, not in a sink's ``close()``, is what makes the read-back see the tables' last
commits: Bytewax closes the outputs of a flow in no fixed order.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from typing_extensions import override

if TYPE_CHECKING:
    from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig

__all__ = ["RunReport", "SummarySink", "TableCount", "iceberg_rows", "postgres_rows"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableCount:
    """A table the summary names, and how to read its row count back.

    Attributes:
        name: The table as the summary names it (``sales.orders``).
        where: Where it lives (``iceberg thalweg-data/warehouse``), no secret; empty
            when ``name`` says it all (a lane's path).
        count: Reads the row count; None when the table does not exist (yet).
        kind: What it is, the line's first word(s): ``table``, ``lane`` (a Parquet
            sink's directory), ``dlq lane``.
    """

    name: str
    where: str
    count: Callable[[], int | None]
    kind: str = "table"

    def line(self, grown: str) -> str:
        """The summary's line for it: ``table sales.orders (iceberg ...): <grown>``."""
        where = f" ({self.where})" if self.where else ""
        return f"  {self.kind} {self.name}{where}: {grown}"

    def standing(self, rows: str) -> str:
        """Where it stands, for the one line of a run that landed nothing new."""
        return f"{self.name} {rows}" if self.kind == "table" else f"{self.kind} {self.name}: {rows}"


@dataclass
class _Stream:
    title: str
    count_by: str | None
    total_of: str | None
    optional: bool
    records: int = 0
    by_value: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def lane_records(path: Path) -> int:
    """The records a Parquet lane holds, from the files' footers (0 when it is empty)."""
    if not path.exists():
        return 0
    return int(ds.dataset(path, format="parquet").count_rows())


class RunReport:
    """Counts of one run of a flow, printed when the process exits after a clean finish.

    Args:
        flow_name: The flow, as the summary's first word.
        raw_lane: The raw lane (its record count is read before and after the run).
        tables: The tables to read back (more with :meth:`add_tables` before the run).
        input_title: The title of the stream whose records count as read.
        at_exit: Print the summary when the process exits (``python -m bytewax.run``);
            False when the caller prints :meth:`lines` itself (``thalweg batch``).
    """

    def __init__(
        self,
        flow_name: str,
        raw_lane: Path,
        tables: Sequence[TableCount],
        *,
        input_title: str = "read",
        at_exit: bool = True,
    ) -> None:
        self.flow_name = flow_name
        self.raw_lane = raw_lane
        self.tables = tuple(tables)
        self.input_title = input_title
        self.at_exit = at_exit
        self._lock = threading.Lock()
        self._streams: dict[str, _Stream] = {}
        self._open = 0
        self._clean = False
        self._started: float | None = None
        self._before: dict[str, int | None] = {}

    def sink(
        self,
        title: str,
        *,
        count_by: str | None = None,
        total_of: str | None = None,
        optional: bool = False,
    ) -> SummarySink:
        """A sink counting a stream of keyed batches under ``title``.

        Several sinks may share a title (two reject streams count as one).

        Args:
            title: How the summary names the stream (``rejected``).
            count_by: A column whose values are counted too (the DLQ ``reason``).
            total_of: Count the sum of this column instead of rows (``late_records``).
            optional: Leave the stream out of the summary while its count is 0.
        """
        self._streams.setdefault(title, _Stream(title, count_by, total_of, optional))
        return SummarySink(self, title)

    def add_tables(self, tables: Sequence[TableCount]) -> None:
        """Read these tables back too (call it before the run starts)."""
        self.tables = (*self.tables, *tables)

    # -- called by the partitions ------------------------------------------------------

    def opened(self) -> None:
        """A partition was built: the first one reads the 'before' counts and arms the exit."""
        with self._lock:
            self._open += 1
            if self._started is not None:
                return
            self._started = time.perf_counter()
            self._before = self._counts()
            if self.at_exit:
                atexit.register(self.print)

    def add(self, title: str, batch: pa.RecordBatch) -> None:
        """Count one batch of the stream ``title``."""
        stream = self._streams[title]
        counts = None
        if stream.count_by and stream.count_by in batch.schema.names:
            counts = pc.value_counts(batch.column(stream.count_by)).to_pylist()
        n = batch.num_rows
        if stream.total_of is not None:
            n = int(pc.sum(batch.column(stream.total_of)).as_py() or 0)
        with self._lock:
            stream.records += n
            for entry in counts or ():
                stream.by_value[str(entry["values"])] += entry["counts"]

    def closed(self) -> None:
        """A partition closed (Bytewax closes them on a clean finish only)."""
        with self._lock:
            self._open -= 1
            self._clean = self._open == 0

    # -- the summary -------------------------------------------------------------------

    def _counts(self) -> dict[str, int | None]:
        counts: dict[str, int | None] = {"raw": lane_records(self.raw_lane)}
        for table in self.tables:
            try:
                counts[table.name] = table.count()
            except Exception:  # a read-back must not turn a finished run into a failure
                logger.warning(
                    "summary: cannot read back table `%s`",
                    table.name,
                    exc_info=logger.isEnabledFor(logging.DEBUG),
                )
                counts[table.name] = None
        return counts

    def lines(self) -> list[str]:
        """The summary's lines (after a clean finish; empty otherwise)."""
        with self._lock:
            if not self._clean or self._started is None:
                return []
            elapsed = time.perf_counter() - self._started
        after = self._counts()
        before = self._before
        read = self._streams[self.input_title].records if self.input_title in self._streams else 0
        landed = {k: v for k, v in after.items() if v != before.get(k)}
        where = [f"raw lane {self.raw_lane}: {after['raw']:,} records"]
        where += [t.standing(_rows(after.get(t.name))) for t in self.tables]
        if not landed:
            what = f"{read:,} records read, all already landed" if read else "no new records"
            return [f"{self.flow_name}: nothing new ({what}); " + ", ".join(where)]
        rate = f" ({read / elapsed:,.0f} records/s)" if elapsed > 0 else ""
        lines = [f"{self.flow_name}: {read:,} records read in {elapsed:,.1f} s{rate}"]
        lines.append(f"  raw lane {self.raw_lane}: {_grown(after['raw'], before.get('raw'))}")
        for stream in self._streams.values():
            if stream.title == self.input_title or (stream.optional and not stream.records):
                continue
            by = ", ".join(f"{v} {n:,}" for v, n in sorted(stream.by_value.items()))
            lines.append(f"  {stream.title}: {stream.records:,}" + (f" ({by})" if by else ""))
        for table in self.tables:
            grown = _grown(after.get(table.name), before.get(table.name), unit="rows")
            lines.append(table.line(grown))
        return lines

    def print(self) -> None:
        """Print the summary to stdout (registered to run at exit), unless the run failed."""
        # Bytewax may close partitions on the way out of a failed run too; an exception
        # the interpreter reported (`sys.last_value`) means the run did not finish.
        if getattr(sys, "last_value", None) is not None:
            return
        lines = self.lines()
        if lines:
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()


def _rows(n: int | None) -> str:
    return "not created" if n is None else f"{n:,} rows"


def _grown(now: int | None, before: int | None, *, unit: str = "records") -> str:
    if now is None:
        return "not created"
    delta = now - (before or 0)
    return f"{now:,} {unit} ({delta:+,})"


class _SummaryPartition(StatelessSinkPartition[tuple[str, pa.RecordBatch]]):
    def __init__(self, report: RunReport, title: str) -> None:
        self._report = report
        self._title = title
        report.opened()

    @override
    def write_batch(self, items: list[tuple[str, pa.RecordBatch]]) -> None:
        for _, batch in items:
            self._report.add(self._title, batch)

    @override
    def close(self) -> None:
        self._report.closed()


class SummarySink(DynamicSink[tuple[str, pa.RecordBatch]]):
    """Count keyed batches into a :class:`RunReport` (made by :meth:`RunReport.sink`).

    Args:
        report: The report the counts go to.
        title: The stream's name in the summary.
    """

    def __init__(self, report: RunReport, title: str) -> None:
        self._report = report
        self._title = title

    @override
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _SummaryPartition:
        return _SummaryPartition(self._report, self._title)


def iceberg_rows(catalog: IcebergCatalogConfig, name: str) -> Callable[[], int | None]:
    """A reader of an Iceberg table's row count (None while the table is absent)."""

    def count() -> int | None:
        from pyiceberg.exceptions import (  # noqa: PLC0415 - at run time only
            NoSuchNamespaceError,
            NoSuchTableError,
        )

        try:
            table = catalog.load().load_table(name)
        except (NoSuchTableError, NoSuchNamespaceError):
            return None
        snapshot = table.current_snapshot()
        if snapshot is None:
            return 0
        total = snapshot.summary.get("total-records") if snapshot.summary else None
        return int(total) if total is not None else len(table.scan().to_arrow())

    return count


def postgres_rows(dsn: str, schema: str, table: str) -> Callable[[], int | None]:
    """A reader of a PostgreSQL table's row count (None while the table is absent)."""

    def count() -> int | None:
        import psycopg  # noqa: PLC0415 - at run time only
        from psycopg import sql  # noqa: PLC0415

        with psycopg.connect(dsn, connect_timeout=10) as conn:
            name = sql.Identifier(schema, table).as_string(conn)
            row = conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()
            if row is None or row[0] is None:
                return None
            query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, table))
            found = conn.execute(query).fetchone()
            return int(found[0]) if found is not None else 0

    return count
