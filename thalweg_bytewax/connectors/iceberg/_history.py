"""Private: the bound on an Iceberg sink's snapshot history, and what an expiry carries.

A sink commits a snapshot per table and epoch (every 10 s by default), and every
snapshot stays in the table's metadata until it is expired: the metadata file, which
each commit reads and writes whole, grows by about a kilobyte a snapshot, so a flow
that runs for weeks writes megabytes at every commit and reads them at every start.
An epoch commit therefore also expires the oldest snapshots of the table's ancestry
once it holds more than ``keep_snapshots`` (a few more, so expiring is not a cost of
every commit), in the same transaction.

The sink's exactly-once state lives in those snapshots: each commit carries the full
coverage of the source partitions it wrote, and a resumed sink unites the coverage over
the ancestry (:func:`~._summary.read_coverage`). A partition that has not been written
for a while (idle, or owned by a writer that stopped) is named only by old snapshots,
so before they go, the expiring commit carries what they held: the coverage of every
``thalweg.coverage.*`` key no kept snapshot names (any sink id's, with its resets
applied), and :data:`FOREIGN_DELETES_KEY` when an expired snapshot of another writer
removed rows. What a resumed sink reads over the kept ancestry is then what it read
over the whole.

Only the oldest ancestors go, so the kept ones stay one unbroken chain; the heads of
tags and branches stay (pyiceberg protects them). The table's own retention properties
are honoured: ``history.expire.min-snapshots-to-keep`` raises the count kept, and
``history.expire.max-snapshot-age-ms``, when the table sets it, keeps every younger
snapshot. Files only expired snapshots reference (their manifest lists, manifests
merged away, an upsert's replaced data files) are left to the table's orphan-file
maintenance.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import ancestors_of
from pyiceberg.utils.properties import property_as_int

from thalweg_bytewax.errors import ConfigError

from ._summary import (
    COVERAGE_PREFIX,
    FOREIGN_DELETES_KEY,
    LANDED_DEPTH,
    RESET_PREFIX,
    encode_spans,
    united_coverage,
)

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot


__all__ = ["MIN_KEEP_SNAPSHOTS", "Expiry", "carried_properties", "plan_expiry", "slack"]

MIN_KEEP_SNAPSHOTS = LANDED_DEPTH
"""The fewest snapshots a sink keeps: a retried commit looks this far back for itself."""
_MIN_KEEP = "history.expire.min-snapshots-to-keep"
_MAX_AGE = "history.expire.max-snapshot-age-ms"


class Expiry:
    """What an epoch commit does to bound the history: properties to carry, ids to expire.

    Attributes:
        carried: Snapshot-summary properties the commit adds (the coverage the expired
            snapshots alone held, and :data:`FOREIGN_DELETES_KEY`).
        expired: The ids of the snapshots the commit removes, oldest ancestors first.
    """

    __slots__ = ("carried", "expired")

    def __init__(self, carried: dict[str, str], expired: list[int]) -> None:
        self.carried = carried
        self.expired = expired


def slack(keep: int) -> int:
    """Snapshots the history may hold past ``keep`` before a commit expires them."""
    return max(keep // 8, 8)


def plan_expiry(metadata: TableMetadata, keep: int | None) -> Expiry | None:
    """The expiry the next commit on ``metadata`` makes, or None when none is due.

    ``keep`` counts the snapshots kept with the commit's own (None: never expire). Due
    when the current ancestry holds ``keep`` plus :func:`slack` (so no commit leaves
    more); the ancestry is then cut to its newest ``keep - 1``, raised by the table's
    retention properties.
    """
    if keep is None or len(metadata.snapshots) < keep + slack(keep):
        return None
    keep = max(keep, _int_property(metadata, _MIN_KEEP, 0) or 0)
    chain = list(ancestors_of(metadata.current_snapshot(), metadata))
    if len(chain) < keep + slack(keep):
        return None
    kept = keep - 1
    max_age = _int_property(metadata, _MAX_AGE, None)
    if max_age is not None:
        oldest_kept = int(time.time() * 1000) - max_age
        while kept < len(chain) and chain[kept].timestamp_ms >= oldest_kept:
            kept += 1
    if kept >= len(chain):
        return None
    protected = {
        ref.snapshot_id
        for ref in metadata.refs.values()
        if ref.snapshot_ref_type in (SnapshotRefType.TAG, SnapshotRefType.BRANCH)
    }
    tail = chain[kept:]
    expired = [s.snapshot_id for s in reversed(tail) if s.snapshot_id not in protected]
    if not expired:
        return None
    return Expiry(carried_properties(chain[:kept], tail), expired)


def carried_properties(kept: list[Snapshot], tail: list[Snapshot]) -> dict[str, str]:
    """What the snapshots in ``tail`` hold that a walk over ``kept`` alone would miss.

    ``kept`` and ``tail`` are one ancestry, newest first, cut in two. The coverage of
    each key (``<sink id>/<topic>:<partition>``) no snapshot in ``kept`` names is
    united over ``tail`` down to its newest reset, as :func:`~._summary.read_coverage`
    reads it; a key ``kept`` names is whole there (each commit carries the full
    coverage of what it wrote).
    """
    # Keys a kept snapshot names (its coverage, or a reset past which nothing counts).
    named = set()
    for snapshot in kept:
        for name in _properties(snapshot):
            if name.startswith(COVERAGE_PREFIX):
                named.add(name[len(COVERAGE_PREFIX) :])
            elif name.startswith(RESET_PREFIX):
                named.add(name[len(RESET_PREFIX) :])
    coverage, foreign_deletes = united_coverage(tail, None)
    carried = {
        f"{COVERAGE_PREFIX}{key}": encode_spans(spans)
        for key, spans in coverage.items()
        if key not in named
    }
    if foreign_deletes:
        carried[FOREIGN_DELETES_KEY] = "1"
    return carried


def _properties(snapshot: Snapshot) -> dict[str, Any]:
    summary = snapshot.summary
    return summary.additional_properties if summary is not None else {}


def _int_property(metadata: TableMetadata, name: str, default: int | None) -> int | None:
    try:
        return property_as_int(metadata.properties, name, default)
    except ValueError:
        value = metadata.properties.get(name, "")
        msg = (
            f"iceberg sink: the table property `{name}` expected a whole number; got "
            f"{value[:40]!r}; fix it with the catalog (ALTER TABLE ... SET TBLPROPERTIES)"
        )
        raise ConfigError(msg) from None
