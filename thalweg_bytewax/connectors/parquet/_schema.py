"""Private: the schema of a Parquet lane as one sink partition writes it — evolve or refuse.

The lane remembers its schema in versions, ``.thalweg-schema-<n>.arrow`` at its root
(hidden from readers; :meth:`LaneStore.record_schema`), each holding the one before it:
columns are only added (nullable) or, with ``allow_widening=True``, widened losslessly
(:mod:`thalweg_bytewax.lanes._schema`). A partition checks each batch whose schema is not
the lane's against the newest version before staging it, and refuses a change that
cannot evolve (``SchemaEvolutionError``, naming the lane, the column, the old and the new
type) before any row of it is staged: the epoch fails and nothing of it becomes
visible. An accepted change is recorded at the epoch's commit, before any file of the
epoch is finalized, so a version is never ahead of a finalized file's schema and an
epoch that never commits records nothing. Versions are created exclusively: writers of
other partitions (threads, processes) that change the schema at once see each other's
version and plan again, and an incompatible pair fails the later commit.

A lane written before versions existed gets its first one from the schemas of the files
it holds (read once, from the footers).
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.fs as pafs

from thalweg_bytewax import _faults
from thalweg_bytewax.catalog.steps import SchemaEvolutionError
from thalweg_bytewax.errors import SinkTerminalError
from thalweg_bytewax.lanes._schema import conform, evolve, file_schemas, unify_file_schemas

from ..raw_lane._store import LaneStore

__all__ = ["LaneSchema"]

logger = logging.getLogger(__name__)

# Each lost race means another writer recorded a version in between; this many in one
# commit means versions are not visible after they are created (a store without
# read-after-write listing), and retrying would spin forever.
_MAX_RECORD_ATTEMPTS = 64


class LaneSchema:
    """The lane schema one sink partition conforms its batches to.

    Args:
        store: The lane.
        allow_widening: Widen a column losslessly instead of refusing the batch.
        component: The sink's name in messages.
    """

    def __init__(
        self, store: LaneStore, *, allow_widening: bool, component: str = "parquet sink"
    ) -> None:
        self._store = store
        self._allow_widening = allow_widening
        self._component = component
        self._loaded = False
        self._version = 0  # the newest recorded version read (0: none)
        self._current: pa.Schema | None = None  # what staged rows conform to
        self._pending = False  # `_current` is not recorded yet

    @property
    def current(self) -> pa.Schema | None:
        """The schema rows are staged with (recorded, or recorded at the next commit)."""
        return self._current

    def conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` in the lane's schema, evolving it where the rules allow.

        Raises:
            SchemaEvolutionError: The batch needs a change the lane refuses; nothing
                of it may be staged.
        """
        current = self._current
        if current is not None and batch.schema.equals(current):
            return batch
        if not self._loaded:
            self._load()
        step = evolve(self._current, batch.schema, allow_widening=self._allow_widening)
        if step.changed or step.refusals:
            # Another writer may have changed the lane since it was read: plan on the
            # newest version, so a refusal names what the lane really holds.
            self._refresh()
            step = evolve(self._current, batch.schema, allow_widening=self._allow_widening)
        if step.refusals:
            msg = f"{self._component} `{self._store.root}`: {step.refused_message(batch.schema)}"
            raise SchemaEvolutionError(msg)
        if step.changed:
            self._current = step.schema
            self._pending = True
        assert self._current is not None
        return conform(batch, self._current)

    def record(self) -> None:
        """Record the schema staged rows use, before the epoch's files are finalized.

        Raises:
            SchemaEvolutionError: Another writer recorded a change this partition's
                staged rows cannot join (the epoch then fails and replays).
            SinkTerminalError: No version could be taken (a store that does not list
                what it created).
        """
        attempts = 0
        while self._pending:
            attempts += 1
            if attempts > _MAX_RECORD_ATTEMPTS:
                msg = (
                    f"{self._component} `{self._store.root}`: could not record the lane's "
                    f"schema; expected a free version after {_MAX_RECORD_ATTEMPTS} attempts; "
                    f"got version {self._version + 1} taken each time. The file system must "
                    f"list a file once it is created: use one that does"
                )
                raise SinkTerminalError(msg)
            self._refresh()
            if not self._pending:
                return
            assert self._current is not None
            if self._store.record_schema(self._version + 1, self._current):
                self._version += 1
                self._pending = False
                _faults.checkpoint("parquet.schema_recorded")  # no file of the epoch final yet
                logger.info(
                    "%s `%s`: schema version %s recorded (%s columns)",
                    self._component,
                    self._store.root,
                    self._version,
                    len(self._current),
                )

    def _load(self) -> None:
        self._loaded = True
        self._version, recorded = self._store.newest_schema()
        if recorded is not None:
            self._current = recorded
            return
        # No version yet: a new lane, or one written before versions existed.
        if not self._holds_data_files():
            return  # a new lane: its first batch's schema is its first version
        import pyarrow.dataset as ds  # noqa: PLC0415 - ~7 MB a new lane never needs

        dataset = ds.dataset(self._store.root, format="parquet", filesystem=self._store.fs)
        assert isinstance(dataset, ds.FileSystemDataset)
        files = file_schemas(list(dataset.get_fragments()))
        self._current = unify_file_schemas(self._store.root, files)
        if self._current is not None:
            self._pending = True
            logger.info(
                "%s `%s`: the lane has no schema version yet; its first is the join of "
                "its %s files' schemas",
                self._component,
                self._store.root,
                len(files),
            )

    def _holds_data_files(self) -> bool:
        """Whether the lane holds a file a Parquet dataset of it would read.

        The files ``pyarrow.dataset`` reads: every file under the lane whose path has no
        part starting with ``.`` or ``_`` (staging files, the schema versions).
        """
        root = self._store.root.rstrip("/")
        selector = pafs.FileSelector(root, allow_not_found=True, recursive=True)
        for info in self._store.fs.get_file_info(selector):
            if info.type != pafs.FileType.File:
                continue
            parts = info.path[len(root) :].strip("/").split("/")
            if not any(part.startswith((".", "_")) for part in parts):
                return True
        return False

    def _refresh(self) -> None:
        """Take in a newer recorded version, keeping this partition's pending change."""
        version, recorded = self._store.newest_schema()
        if version <= self._version or recorded is None:
            return
        self._version = version
        if not self._pending or self._current is None:
            self._current = recorded
            self._pending = False
            return
        step = evolve(recorded, self._current, allow_widening=True, missing="relax")
        if step.refusals:
            msg = (
                f"{self._component} `{self._store.root}`: another writer changed the "
                f"lane's schema (version {version}) in a way this epoch's rows cannot "
                f"join: {step.refused_message(self._current)}"
            )
            raise SchemaEvolutionError(msg)
        self._current = step.schema
        self._pending = step.changed
