"""The raw lane as a source: replay chosen offsets of a Parquet raw lane, in order.

:class:`RawLaneSource` reads the RawBatches a ``ParquetSink`` raw lane holds
(``<lane>/<topic>/<partition>/<first>-<last>.parquet``) back into a dataflow, exactly as
the source once emitted them: payload bytes, headers and every locator column. It is
what ``thalweg recover`` puts in place of the flow's Kafka source, so the replay goes
through the flow's own decode → contract → SQL path into the lagging sink, and Kafka is
never contacted.

Topic-partitions are the unit of parallelism: one Bytewax partition per source
topic-partition in the plan. Each reads only the finalized files that overlap its
offsets, in offset order, row group by row group (row groups outside the offsets are
skipped by their statistics), and emits batches of at most ``batch_size`` rows, so
memory stays bounded whatever the lane's size. Its state is the next offset to emit:
with a recovery directory, a recovery that is killed resumes after the last batch of
its last completed epoch. The sink skips offsets it already holds, so a replay is
written once.

:func:`lane_held_offsets` says which offsets a raw lane's files still hold, from their
names alone (the retention guard of :mod:`thalweg_bytewax.coverage.recovery_plan`);
:func:`lane_rows_missing` checks those names against the rows the files hold, from
their offsets column (the lane check).
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from typing_extensions import override

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.errors import ConfigError, SourceError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime import crossings
from thalweg_bytewax.runtime.parts import announce_listing, decode_part, encode_part

from ._lane_claim import read_claim
from ._lane_store import FINAL_NAME, LaneStore, open_store, topic_dir_name

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "ProgressCallback",
    "RawLaneSource",
    "lane_held_offsets",
    "lane_rows_missing",
    "only_output",
]

logger = logging.getLogger(__name__)

# As KafkaSource's default poll budget: the flow downstream sees batches of the size it
# sees live, so decode and the sinks run at their measured rate (docs/benchmarks.md).
DEFAULT_BATCH_SIZE = 10_000

ProgressCallback = Callable[[str, int], None]
"""Called with a partition key and how many of its planned offsets are now replayed."""

_File = tuple[int, int, str]  # first offset, last offset, path


def _io_error(lane: str, what: str, exc: OSError | pa.ArrowException) -> SourceError:
    msg = (
        f"raw lane source `{lane}`: cannot {what} ({type(exc).__name__}); expected a "
        f"readable raw lane as `ParquetSink` writes it"
    )
    return SourceError(msg)


def _files(store: LaneStore, topic: str, partition: int) -> list[_File]:
    directory = store.join(topic_dir_name(topic), str(partition))
    out = []
    for name in store.list_names(directory):
        m = FINAL_NAME.match(name)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), store.child(directory, name)))
    return sorted(out)


def _topic_of(store: LaneStore, dirname: str, path: str, columns: MetadataColumns) -> str:
    if "~" not in dirname:  # a percent-encoded name: reversible
        return urllib.parse.unquote(dirname)
    with store.fs.open_input_file(path) as f:  # a long name kept as prefix + digest
        first = pq.ParquetFile(f).read_row_group(0, columns=[columns.source_topic])
    return str(first.column(0)[0].as_py())


def lane_held_offsets(
    lane: str | os.PathLike[str],
    *,
    filesystem: pafs.FileSystem | None = None,
    metadata_prefix: str = DEFAULT_PREFIX,
) -> dict[tuple[str, int], OffsetCoverage]:
    """The offsets a raw lane's finalized files hold, per ``(topic, partition)``.

    Read from the file names (``<first>-<last>.parquet``) alone: a file holds its whole
    span (offsets inside it that carry no record, such as transaction markers, are not
    records to replay).

    Args:
        lane: The raw lane directory or URI.
        filesystem: A ``pyarrow.fs.FileSystem`` for ``lane``.
        metadata_prefix: Prefix of the metadata columns.

    Raises:
        SourceError: When the lane cannot be listed.
    """
    store = open_store(lane, filesystem)
    columns = MetadataColumns(metadata_prefix)
    held: dict[tuple[str, int], OffsetCoverage] = {}
    try:
        for dirname in store.list_names(store.root):
            if dirname.startswith((".", "_")):
                continue
            for part in store.list_names(store.join(dirname)):
                if not part.isdigit():
                    continue
                directory = store.join(dirname, part)
                found = [
                    (int(m.group(1)), int(m.group(2)), name)
                    for name in store.list_names(directory)
                    if (m := FINAL_NAME.match(name))
                ]
                if not found:
                    continue
                path = store.child(directory, min(found)[2])
                topic = _topic_of(store, dirname, path, columns)
                held[(topic, int(part))] = OffsetCoverage((lo, hi) for lo, hi, _ in found)
    except (OSError, pa.ArrowException) as exc:
        raise _io_error(store.root, "list its files", exc) from exc
    return held


def _spans_of(offsets: np.ndarray) -> OffsetCoverage:
    """The offsets of a sorted int64 array (repeats allowed) as a coverage (vectorised)."""
    if offsets.size == 0:
        return OffsetCoverage()
    breaks = np.flatnonzero(np.diff(offsets) > 1)
    starts = np.concatenate(([offsets[0]], offsets[breaks + 1]))
    ends = np.concatenate((offsets[breaks], [offsets[-1]]))
    return OffsetCoverage(zip(starts.tolist(), ends.tolist(), strict=True))


def lane_rows_missing(
    lane: str | os.PathLike[str],
    plan: Mapping[tuple[str, int], OffsetCoverage],
    *,
    filesystem: pafs.FileSystem | None = None,
    metadata_prefix: str = DEFAULT_PREFIX,
    written_holes: dict[tuple[str, int], list[tuple[str, OffsetCoverage]]] | None = None,
) -> dict[tuple[str, int], list[tuple[str, OffsetCoverage]]]:
    """Planned offsets that a lane file is named for but holds no row of.

    A file's name (``<first>-<last>.parquet``) is what the lane claims; its rows are
    what a replay can read. Only the footer and the offsets column of the files the plan
    touches are read. Offsets without a record in the source (transaction markers,
    compacted records) show up here too, unless the file's footer tells them apart: a
    file whose footer claim (``thalweg.first_offset``/``last_offset``/``rows``, written
    by the sink) matches its name and its row count holds what the sink wrote, so the
    offsets missing inside it never reached the sink. With ``written_holes`` given,
    those go there instead; files without a claim (written before it existed) or whose
    rows no longer match it are always returned.

    Args:
        lane: The raw lane directory or URI.
        plan: Per ``(topic, partition)``, the offsets a recovery replays.
        filesystem: A ``pyarrow.fs.FileSystem`` for ``lane``.
        metadata_prefix: Prefix of the metadata columns.
        written_holes: Receives, per partition, ``(file name, offsets)`` of offsets
            missing from files whose footer vouches they were missing when written.

    Returns:
        Per partition with such offsets, ``(file name, offsets)`` for each file.

    Raises:
        SourceError: When a file cannot be listed or read.
    """
    store = open_store(lane, filesystem)
    column = MetadataColumns(metadata_prefix).source_offset
    out: dict[tuple[str, int], list[tuple[str, OffsetCoverage]]] = {}
    for key, wanted in sorted(plan.items()):
        try:
            files = _files(store, *key)
        except (OSError, pa.ArrowException) as exc:
            raise _io_error(store.root, f"list `{encode_part(*key)}`", exc) from exc
        for lo, hi, path in files:
            if not wanted.overlaps(lo, hi):
                continue
            try:
                with store.fs.open_input_file(path) as f:
                    opened = pq.ParquetFile(f)
                    claim = read_claim(opened.metadata)
                    read = opened.read(columns=[column]).column(0)
            except (OSError, pa.ArrowException) as exc:
                raise _io_error(store.root, f"read `{path}`", exc) from exc
            held = _spans_of(np.sort(read.to_numpy().astype(np.int64, copy=False)))
            absent = OffsetCoverage(
                gap
                for a, b in wanted.spans
                if a <= hi and b >= lo
                for gap in held.uncovered(max(a, lo), min(b, hi))
            )
            if absent:
                vouched = (
                    written_holes is not None
                    and claim == (lo, hi, len(read))
                    and (held.first, held.last) == (lo, hi)
                )
                into = written_holes if vouched and written_holes is not None else out
                into.setdefault(key, []).append((path.rpartition("/")[2], absent))
    return out


class RawLaneSource(FixedPartitionedSource[KeyedBatch, int]):
    """Replay chosen offsets of a raw lane as keyed RawBatches, in offset order.

    Topic-partitions are the unit of parallelism; the state of each is the next offset
    to emit. Exactly-once with a sink that skips the offsets it holds (every epoch
    sink does): a replay after a crash is skipped, not written twice.

    Example::

        plan = {("orders", 0): OffsetCoverage([(400, 799)])}
        flow = Dataflow("orders")
        raw = op.input("orders_in", flow, RawLaneSource("thalweg-data/raw", plan))

    Args:
        lane: The raw lane directory or URI (``ParquetSink``'s ``path``).
        offsets: Per ``(topic, partition)``, the offsets to replay.
        filesystem: A ``pyarrow.fs.FileSystem`` for ``lane``.
        batch_size: Rows per emitted batch at most.
        metadata_prefix: Prefix of the metadata columns.
        progress: Called after each batch with the partition key and how many of its
            planned offsets are replayed (offsets, not rows: a lane has holes).
    """

    def __init__(
        self,
        lane: str | os.PathLike[str],
        offsets: Mapping[tuple[str, int], OffsetCoverage],
        *,
        filesystem: pafs.FileSystem | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        metadata_prefix: str = DEFAULT_PREFIX,
        progress: ProgressCallback | None = None,
    ) -> None:
        if not isinstance(lane, str | os.PathLike) or not os.fspath(lane):
            msg = f"raw lane source: `lane` expected a raw lane directory or URI; got {lane!r}"
            raise ConfigError(msg)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            msg = f"raw lane source: `batch_size` expected an integer >= 1; got {batch_size!r}"
            raise ConfigError(msg)
        for key, cov in offsets.items():
            if not isinstance(cov, OffsetCoverage):
                msg = (
                    f"raw lane source: offsets of `{key}` expected an OffsetCoverage; got "
                    f"{type(cov).__name__}"
                )
                raise ConfigError(msg)
        self.lane = os.fspath(lane)
        self.filesystem = filesystem
        self.offsets = {k: v for k, v in offsets.items() if v}
        self.batch_size = batch_size
        self.columns = MetadataColumns(metadata_prefix)
        self.progress = progress

    @override
    def list_parts(self) -> list[str]:
        return announce_listing([encode_part(t, p) for t, p in sorted(self.offsets)])

    @override
    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> _RawLanePartition:
        crossings.note_readers([for_part])
        key = decode_part(for_part)
        plan = self.offsets.get(key)
        if plan is None:
            msg = (
                f"raw lane source `{step_id}`: partition `{for_part}` expected one of the "
                f"planned partitions; got a resume state for it (use a fresh recovery "
                f"directory for a new recovery plan)"
            )
            raise ConfigError(msg)
        store = open_store(self.lane, self.filesystem)
        try:
            files = _files(store, *key)
        except (OSError, pa.ArrowException) as exc:
            raise _io_error(self.lane, f"list `{for_part}`", exc) from exc
        start = resume_state if resume_state is not None else plan.first or 0
        if resume_state is not None:
            logger.info("raw lane source: `%s` resumes at offset %s", for_part, start)
        return _RawLanePartition(self, store, for_part, plan, files, start)


class _RawLanePartition(StatefulSourcePartition[KeyedBatch, int]):
    def __init__(
        self,
        source: RawLaneSource,
        store: LaneStore,
        key: str,
        plan: OffsetCoverage,
        files: list[_File],
        next_offset: int,
    ) -> None:
        self._source = source
        self._store = store
        self._key = key
        self._plan = plan
        self._offset_col = source.columns.source_offset
        self._next_offset = next_offset
        last = plan.last if plan.last is not None else -1
        # Only files that hold planned offsets at or after the resume position.
        self._files = [
            f for f in files if f[1] >= next_offset and f[0] <= last and plan.overlaps(f[0], f[1])
        ]
        self._batches: Iterator[pa.RecordBatch] | None = None
        self._file: pa.NativeFile | None = None
        self._report()

    def _report(self) -> None:
        if self._source.progress is None:
            return
        done = sum(
            min(hi, self._next_offset - 1) - lo + 1
            for lo, hi in self._plan.spans
            if lo < self._next_offset
        )
        self._source.progress(self._key, done)

    def _open_next(self) -> Iterator[pa.RecordBatch] | None:
        self._close_file()
        while self._files:
            _, _, path = self._files.pop(0)
            try:
                self._file = self._store.fs.open_input_file(path)
                f = pq.ParquetFile(self._file)
            except (OSError, pa.ArrowException) as exc:
                raise _io_error(self._source.lane, f"open `{path}`", exc) from exc
            groups = self._row_groups(f)
            if groups:
                batches: Iterator[pa.RecordBatch] = f.iter_batches(
                    batch_size=self._source.batch_size, row_groups=groups
                )
                return batches
        return None

    def _row_groups(self, f: pq.ParquetFile) -> list[int]:
        """The row groups whose offsets overlap the plan at or after the next offset."""
        meta = f.metadata
        idx = f.schema_arrow.get_field_index(self._offset_col)
        keep = []
        for i in range(meta.num_row_groups):
            stats = meta.row_group(i).column(idx).statistics if idx >= 0 else None
            if stats is None or not stats.has_min_max:
                keep.append(i)
            elif stats.max >= self._next_offset and self._plan.overlaps(
                max(stats.min, self._next_offset), stats.max
            ):
                keep.append(i)
        return keep

    @override
    def next_batch(self) -> list[KeyedBatch]:
        while True:
            if self._batches is None:
                self._batches = self._open_next()
                if self._batches is None:
                    self._next_offset = max(self._next_offset, (self._plan.last or 0) + 1)
                    self._report()
                    raise StopIteration
            try:
                batch = next(self._batches)
            except StopIteration:
                self._batches = None
                continue
            except (OSError, pa.ArrowException) as exc:
                raise _io_error(self._source.lane, f"read `{self._key}`", exc) from exc
            offsets = batch.column(self._offset_col)
            mask = self._plan.mask(offsets)
            mask &= offsets.to_numpy(zero_copy_only=False) >= self._next_offset
            rows = batch.filter(pa.array(mask)) if not mask.all() else batch
            if rows.num_rows == 0:
                continue
            self._next_offset = int(pc.max(rows.column(self._offset_col)).as_py()) + 1
            self._report()
            return [(self._key, rows)]

    @override
    def next_awake(self) -> datetime | None:
        return None

    @override
    def snapshot(self) -> int:
        return self._next_offset

    def _close_file(self) -> None:
        self._batches = None
        if self._file is not None:
            self._file.close()
            self._file = None

    @override
    def close(self) -> None:
        self._close_file()


def _outputs(steps: list[Any]) -> Iterator[tuple[list[Any], Any]]:
    for step in steps:
        if type(step).__name__ == "output" and hasattr(step, "sink"):
            yield steps, step
        else:
            yield from _outputs(step.substeps)


def only_output(flow: Dataflow, sink: str) -> Dataflow:
    """``flow`` writing to one output step only: every other output step is removed.

    What ``thalweg recover`` runs: the flow's own path (decode, contract, SQL) into the
    one lagging sink, under the same flow and step ids, so the sink finds its own
    target, its replay checks and its coverage rows.

    Args:
        flow: The flow, built with the raw lane source in place of its input.
        sink: The output's step name (``"orders_lane"``) or step id
            (``"orders.orders_lane"``).

    Returns:
        The same dataflow object, pruned.

    Raises:
        ConfigError: When no output step has that name, listing the ones it has.
    """
    found = list(_outputs(flow.substeps))
    kept = [s for _, s in found if sink in (s.step_id, s.step_name)]
    if len(kept) != 1:
        names = ", ".join(f"`{s.step_id}`" for _, s in found) or "none"
        msg = (
            f"recover: flow `{flow.flow_id}` expected one output step named `{sink}`; got "
            f"{len(kept)} among its outputs {names}"
        )
        raise ConfigError(msg)
    for parent, step in found:
        if step is not kept[0]:
            parent.remove(step)
    return flow
