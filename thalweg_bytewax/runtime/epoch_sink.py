"""The epoch-sink protocol: stage during the epoch, durable at ``snapshot()``, replays absorbed.

Every table and lane sink partition here is an :class:`EpochSinkPartition`, a Bytewax
``StatefulSinkPartition`` of keyed Arrow batches that carry their locator columns
(``<prefix>source_topic``, ``source_partition``, ``source_offset``). The base owns the
protocol; a sink implements a few hooks:

- ``open_partition(key, topic, partition)`` — once per source partition, on its first
  rows: what the target already holds, as an :class:`~thalweg_bytewax.coverage.OffsetCoverage`.
- ``stage(key, rows)`` — pipelined, no durable wait: produce asynchronously, append to
  a hidden staging file, buffer rows. Nothing staged is visible to readers.
- ``commit_epoch()`` — the one durable wait of the epoch (flush, fsync + atomic rename,
  ``COMMIT``). When it returns, everything staged since the last commit is durable.
- ``abort()`` — after a failed write or commit: drop what is staged (optional).
- ``release()`` — free clients and threads at ``close()``; never publishes (optional).
- ``held_record_ids(key, first, last)`` — the (offset, record id) pairs the target holds
  in a range, where the sink can read them back (optional).
- ``replaced_by_key(key, rows)`` — for a target that replaces rows by key (upserts):
  whether it holds a later row of each row's key (optional).

A sink whose ``open_partition`` finds its target lost what its coverage claims (a table
dropped or emptied by a user) refills it or refuses: it calls
:meth:`EpochSinkPartition.target_lost` so the coverage store forgets those partitions,
and reads :meth:`EpochSinkPartition.resumed_offset` to know whether the source will
replay them.

The base, in order, for each batch: refuses rows without a locator; refuses rows whose
source partition routes to another shard of the sink (one owner per source partition:
coverage is per (sink, topic, partition), so two shards writing one partition would
skip each other's rows on a replay); refuses negative offsets and rows that go back in
offset order within a run (skipping by range is exact only for one ordered stream), and,
after a resume, rows below the resumed offsets that the target does not hold (the
source never replays below them: a step upstream held such rows across epochs), and
names with a warning the replayed rows above them that the target does not hold;
skips rows whose offsets are covered, checking the first skipped rows of each partition
by record id against the target; stamps ``<prefix>emit_ts``; stages the rest. Every
group of a batch is checked before any is staged. What a commit records as covered
(:meth:`EpochSinkPartition.pending_coverage`) is each staged group's span and each
input span accounted for whole, never the hole between two groups: the rows of such a
hole may have reached another shard and been refused there, so a sink names what it
writes (a file, a lineage range) within one pending span.

**Rows without a locator** (a stock Bytewax source, window results): a partition built
with ``locators="absent"`` takes batches that carry none of the locator columns (and
refuses those that carry any). Such a batch is stamped and staged whole under the key
:data:`UNLOCATED`, with no ownership, order, offset or coverage checks, and committed
with the same epoch durability. Nothing can tell a replay from new rows, so the
guarantee is the sink's write mode's (:func:`unlocated_guarantee`): at-least-once for
appends (a crash after the target's commit and before the recovery snapshot writes the
epoch's rows again), effectively-once for upserts by key (the replay overwrites the
same keys).

**Where durability lives (the two tensions).** Bytewax's connector guide asks a
``StatefulSinkPartition`` to be durable before ``write_batch`` returns. That allows one
in-flight batch per sink (the per-batch ``flush()`` of Bytewax's own Kafka sink; the
reference's ADR-0060 records a ~20,000x loss from it). This base makes the epoch the
burst instead: durable in ``snapshot()``. That is sound on Bytewax 0.21.1 for
``FixedPartitionedSink`` partitions, because ``src/outputs.rs`` calls ``snapshot()`` at
every epoch close for each partition written in that epoch and only then hands the
state to the recovery store, so the source position stored for an epoch never leads
what the sink made durable. It does not hold for ``DynamicSink`` partitions: they are
never snapshotted, so such a partition must be durable before each ``write_batch``
returns. ``close()`` runs only on a clean finish, never on an abort, so it cannot be the
only flush; this base never publishes there (on a clean finish Bytewax snapshots the
last epoch first). After a failed write or commit the failed flag is set, the sink's
``abort()`` runs, and the partition refuses to write or snapshot again: rows of a
failed epoch are never published, and they replay from the source on resume.

The state a partition snapshots is, per source partition key (``"orders:3"``), the next
offset after the last committed row. On resume everything below it counts as covered,
together with what ``open_partition`` reports, so a crash between a sink's commit and
the recovery store's commit is absorbed: the replayed rows are skipped, not written
twice. Kill-and-resume tests (``tests/runtime/test_epoch_sink.py``, ``tests/sinks/``)
SIGKILL a flow at the fault points ``epoch_sink.mid_write`` (rows of the epoch staged),
``epoch_sink.before_commit`` and ``epoch_sink.after_commit``.

**Coverage store.** After :meth:`EpochSinkPartition.record_coverage_to`, each snapshot
merges what the epoch committed (and, once per source partition and run, what
``open_partition`` reported) into a :mod:`~thalweg_bytewax.coverage.store`, after
``commit_epoch()`` returns and before the state goes back to Bytewax: the store may lag,
never lead (:mod:`thalweg_bytewax.coverage.recording`). A batch that carries an
input span (:mod:`thalweg_bytewax.coverage.input_span`) covers that whole span, so offsets
rejected upstream are not gaps.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pyarrow as pa

from thalweg_bytewax.coverage._replay_check import Ledger, ReplayCheck
from thalweg_bytewax.coverage.recording import CoverageRecorder
from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.runtime._epoch_coverage import EpochCoverage
from thalweg_bytewax.runtime._epoch_intake import EpochIntake
from thalweg_bytewax.runtime._epoch_lifecycle import EpochLifecycle, EpochSinkState
from thalweg_bytewax.runtime._epoch_staging import EpochStaging
from thalweg_bytewax.runtime._epoch_wiring import EpochWiring
from thalweg_bytewax.runtime.buffered_size import buffered_size
from thalweg_bytewax.runtime.sink_locators import (
    UNLOCATED,
    LocatorMode,
    check_locator_mode,
    unlocated_guarantee,
)
from thalweg_bytewax.runtime.sink_stats import EpochSinkStats
from thalweg_bytewax.system.huge_pages import limit_huge_pages

if TYPE_CHECKING:
    from thalweg_bytewax.observability.hooks import SinkObserver

__all__ = [
    "UNLOCATED",
    "EpochSinkPartition",
    "EpochSinkState",
    "EpochSinkStats",
    "buffered_size",
    "LocatorMode",
    "check_locator_mode",
    "unlocated_guarantee",
]

logger = logging.getLogger(__name__)


class EpochSinkPartition(
    EpochStaging,
    EpochCoverage,
    EpochWiring,
    EpochIntake,
    EpochLifecycle,
    ABC,
):
    """Base of every epoch-durable sink partition: stage per batch, commit per epoch.

    Source partitions are the unit of ownership: each is written by the one shard its
    key routes to. Exactly-once where the sink's commit is atomic and ``open_partition``
    reports what the target holds; replays are skipped. See the module docstring for the
    protocol and why durability lives in ``snapshot()``.

    Args:
        component: The sink's name in messages, e.g. ``"parquet sink"``.
        columns: The metadata column names (locator, record id, emit time).
        resume_state: The state Bytewax resumed this partition with, or None.
        shard: This partition's index among the sink's partitions.
        shards: How many partitions the sink lists (keys route by :meth:`owner_of`).
        stats: The counters to update (a sink may pass a subclass with more).
        locators: ``"required"`` (exactly once by source offsets) or ``"absent"``
            (rows without a locator, staged under :data:`UNLOCATED`; see the module
            docstring for the guarantee).
    """

    replay_remedy: ClassVar[str] = "point the sink at a new target"
    """The end of the message when a replay does not match what the target holds."""
    merge_remedy: ClassVar[str] = "give each its own target (e.g. `dlq/decode`, `dlq/contract`)"
    """The end of the message when rows of a source partition go back in offset order."""
    readiness_critical: ClassVar[bool] = False
    """Whether a failure of this sink drops the process's readiness (the raw lane's does)."""
    target_replaces_rows: bool = False
    """Whether the target replaces rows by key (upserts): it may no longer hold an offset
    it committed, so a covered row it does not hold is no evidence of a held-back row."""
    unlocated_remedy: ClassVar[str] = (
        "keep the locator with metadata='locator' or 'all', or number rows from another "
        "source with `twg.to_batches(..., locator='counter')`"
    )
    """The end of the message when a batch has no locator columns."""

    def __init__(
        self,
        *,
        component: str,
        columns: MetadataColumns,
        resume_state: EpochSinkState | None,
        shard: int,
        shards: int,
        stats: EpochSinkStats | None = None,
        locators: LocatorMode = "required",
    ) -> None:
        limit_huge_pages()
        self.component = component
        self.locators: LocatorMode = check_locator_mode(component, locators)
        self.columns = columns
        self.shard = shard
        self.shards = shards
        self.stats = stats if stats is not None else EpochSinkStats()
        self._resume = dict(resume_state or {})
        self._ledgers: dict[str, Ledger] = {}
        self._failed = False
        self._unlocated_pending = False  # rows without a locator staged since the commit
        self._recorder: CoverageRecorder | None = None
        self._lost_keys: set[str] = set()  # source partitions whose target was found emptied
        # Counters, commit durations and health when observability is on (else None),
        # registered by `observe_as` once the output step's id is known.
        self._obs: SinkObserver | None = None
        self._observed_as: str | None = None
        self._replay = ReplayCheck(self)
        self._acknowledge_as: tuple[str, str] | None = None  # (flow, sink step id)

    # -- hooks -----------------------------------------------------------------------

    @abstractmethod
    def open_partition(self, key: str, topic: str, partition: int) -> OffsetCoverage:
        """Prepare to write a source partition and say which of its offsets are held.

        Called once per source partition, on its first rows of this run. The coverage
        may lag what the target holds (a replay is then written again, or skipped by
        record id), never lead it.
        """

    @abstractmethod
    def stage(self, key: str, rows: pa.RecordBatch) -> None:
        """Stage rows of one source partition, in offset order; no durable wait here."""

    @abstractmethod
    def commit_epoch(self) -> None:
        """Make everything staged since the last commit durable and visible, or raise."""

    def abort(self) -> None:  # noqa: B027 - optional hook, nothing to drop by default
        """Drop what is staged after a failed write or commit (never publish it)."""

    def release(self) -> None:  # noqa: B027 - optional hook, nothing to free by default
        """Free clients, files and threads at ``close()``; never publish anything."""

    def held_record_ids(self, key: str, first: int, last: int) -> pa.Table | None:
        """The ``(offset, record id)`` columns the target holds in ``[first, last]``.

        Columns are named as in :attr:`columns`. None when the sink cannot read them
        back (then replays are skipped by offset alone).
        """
        return None

    def replaced_by_key(self, key: str, rows: pa.RecordBatch) -> np.ndarray | None:
        """Per row of ``rows``, whether the target holds a later row of the row's key.

        Only asked of a target that replaces rows by key (:attr:`target_replaces_rows`),
        for replayed rows of source partition ``key`` it does not hold at their offsets.
        An ``int8`` array: ``1`` where the target's row of that key comes from a later
        offset of this source partition (the row was replaced: a replay), ``0`` where it
        holds no row of that key or one from an earlier offset (it never got the row),
        ``-1`` where that row comes from another source (nothing orders the two). None
        when the sink cannot look keys up (then such rows are skipped with a warning).
        """
        return None

    def describe_target(self, key: str) -> str:
        """How messages name the target of a source partition, e.g. ``lane `a/t/0```."""
        return f"the target of `{key}`"
