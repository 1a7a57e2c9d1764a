"""Private: what an Iceberg sink's commits leave in the table's snapshot summaries.

Every epoch commit stores, under :data:`COVERAGE_PREFIX`, the covered offsets of each
source partition it touched (as ``"first-last,first-last"``), and its own id under
:data:`COMMIT_KEY`; a refill after the table lost a partition is marked under
:data:`RESET_PREFIX`. This module writes and reads those keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pyiceberg.table.snapshots import ancestors_of

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.errors import ConfigError

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "COMMIT_KEY",
    "COVERAGE_PREFIX",
    "FOREIGN_DELETES_KEY",
    "LANDED_DEPTH",
    "RESET_PREFIX",
    "decode_spans",
    "encode_spans",
    "landed",
    "read_coverage",
    "removed_elsewhere",
    "removes_rows",
    "united_coverage",
]

COVERAGE_PREFIX = "thalweg.coverage."
"""Snapshot-summary keys ``thalweg.coverage.<sink id>/<topic>:<partition>`` hold the
covered offsets of that source partition as ``"first-last,first-last"``."""
RESET_PREFIX = "thalweg.coverage-reset."
"""Snapshot-summary keys ``thalweg.coverage-reset.<sink id>/<topic>:<partition>``: the
commit that refilled a source partition the table had lost; the coverage of that
partition in older snapshots no longer counts."""
COMMIT_KEY = "thalweg.commit"
"""Snapshot-summary key: the unique id of the epoch commit that made the snapshot."""
FOREIGN_DELETES_KEY = "thalweg.foreign-deletes"
"""Snapshot-summary key: a snapshot of another writer that removed rows was expired
before this commit (which carries the fact, as that snapshot would have told it)."""
LANDED_DEPTH = 64
"""How many ancestors a retry searches for its own commit id: other writers' commits
since the attempt, which are few (one per shard and epoch)."""


def encode_spans(coverage: OffsetCoverage) -> str:
    """The compact text of a coverage: ``"0-99,150-199"``."""
    return ",".join(f"{lo}-{hi}" for lo, hi in coverage.spans)


def decode_spans(text: str) -> OffsetCoverage:
    """Parse :func:`encode_spans` output.

    Raises:
        ConfigError: When the text is not ``first-last`` spans separated by commas.
    """
    spans = []
    for part in filter(None, text.split(",")):
        lo, sep, hi = part.partition("-")
        if not sep or not lo.isdigit() or not hi.isdigit():
            msg = (
                f"iceberg sink: coverage property expected `first-last,...`; got {text[:80]!r} "
                f"(the snapshot summary was edited by hand: fix or remove the property)"
            )
            raise ConfigError(msg)
        spans.append((int(lo), int(hi)))
    return OffsetCoverage(spans)


def read_coverage(table: Table | None, sink_id: str) -> tuple[dict[str, OffsetCoverage], bool]:
    """The coverage of every source partition, united over the snapshot ancestry.

    Each commit carries the full coverage of the partitions it touched, so the
    newest snapshot naming a partition holds all of it; the union also survives
    commits of other writers, and snapshots the sink expired (the expiring commit
    carries what only they held). A partition's coverage stops at the newest commit
    that refilled it after the table lost it (:data:`RESET_PREFIX`): what older
    snapshots claimed was deleted. Also whether a commit not of thalweg removed rows
    (a delete or an overwrite), or a commit says an expired one did
    (:data:`FOREIGN_DELETES_KEY`).
    """
    if table is None or table.current_snapshot() is None:
        return {}, False
    return united_coverage(ancestors_of(table.current_snapshot(), table.metadata), sink_id)


def united_coverage(
    snapshots: Iterable[Snapshot], sink_id: str | None
) -> tuple[dict[str, OffsetCoverage], bool]:
    """:func:`read_coverage` over ``snapshots``, one ancestry newest first.

    ``sink_id`` None reads every sink's keys, as ``<sink id>/<topic>:<partition>``.
    """
    held: dict[str, OffsetCoverage] = {}
    foreign_deletes = False
    prefix = COVERAGE_PREFIX if sink_id is None else f"{COVERAGE_PREFIX}{sink_id}/"
    reset = RESET_PREFIX if sink_id is None else f"{RESET_PREFIX}{sink_id}/"
    done: set[str] = set()
    for snapshot in snapshots:
        summary = snapshot.summary
        props = summary.additional_properties if summary is not None else {}
        foreign_deletes = foreign_deletes or removed_elsewhere(snapshot)
        for name, value in props.items():
            if name.startswith(prefix) and name[len(prefix) :] not in done:
                key = name[len(prefix) :]
                held[key] = held.get(key, OffsetCoverage()) | decode_spans(value)
        done.update(name[len(reset) :] for name in props if name.startswith(reset))
    return held, foreign_deletes


def landed(table: Table, commit_id: str) -> bool:
    """Whether a commit with ``commit_id`` is in the table's recent ancestry."""
    current = table.current_snapshot()
    if current is None:
        return False
    for depth, snapshot in enumerate(ancestors_of(current, table.metadata)):
        if depth >= LANDED_DEPTH:
            break
        summary: Any = snapshot.summary
        if summary is not None and summary.additional_properties.get(COMMIT_KEY) == commit_id:
            return True
    return False


def removed_elsewhere(snapshot: Snapshot) -> bool:
    """Whether ``snapshot`` removed rows not as a thalweg commit, or says an expired one did."""
    summary: Any = snapshot.summary
    if summary is None:
        return False
    props = summary.additional_properties
    return FOREIGN_DELETES_KEY in props or (COMMIT_KEY not in props and removes_rows(summary))


def removes_rows(summary: Any) -> bool:
    """Whether a snapshot summary says its commit removed rows (a delete or overwrite)."""
    operation = getattr(summary.operation, "value", summary.operation)
    deleted = summary.additional_properties.get("deleted-records")
    return operation in ("delete", "overwrite") or (deleted is not None and str(deleted) != "0")
