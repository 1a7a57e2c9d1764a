"""Private: what a raw lane's files hold, from their names and from their offsets column.

:func:`lane_held_offsets` reads the names alone (the retention guard of
:mod:`thalweg_bytewax.coverage.recovery_plan`); :func:`lane_rows_missing` checks those
names against the rows the files hold (the lane check).
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns
from thalweg_bytewax.runtime.parts import encode_part

from ._claim import read_claim
from ._store import FINAL_NAME, LaneStore, open_store, topic_dir_name

__all__ = ["LaneFile", "io_error", "lane_files", "lane_held_offsets", "lane_rows_missing"]

LaneFile = tuple[int, int, str]
"""A finalized file of a partition: first offset, last offset, path."""


def io_error(lane: str, what: str, exc: OSError | pa.ArrowException) -> SourceError:
    msg = (
        f"raw lane source `{lane}`: cannot {what} ({type(exc).__name__}); expected a "
        f"readable raw lane as `ParquetSink` writes it"
    )
    return SourceError(msg)


def lane_files(store: LaneStore, topic: str, partition: int) -> list[LaneFile]:
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
        raise io_error(store.root, "list its files", exc) from exc
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
            files = lane_files(store, *key)
        except (OSError, pa.ArrowException) as exc:
            raise io_error(store.root, f"list `{encode_part(*key)}`", exc) from exc
        for lo, hi, path in files:
            if not wanted.overlaps(lo, hi):
                continue
            try:
                with store.fs.open_input_file(path) as f:
                    opened = pq.ParquetFile(f)
                    claim = read_claim(opened.metadata)
                    read = opened.read(columns=[column]).column(0)
            except (OSError, pa.ArrowException) as exc:
                raise io_error(store.root, f"read `{path}`", exc) from exc
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
