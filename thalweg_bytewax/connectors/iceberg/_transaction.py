"""Private: a pyiceberg transaction that derives its staged metadata once per change.

pyiceberg's ``Transaction.table_metadata`` applies every staged update to the table's
metadata and deep-copies the result each time it is read, and building one commit reads
it about twenty times (the snapshot producer asks it for the schema, the spec, the
properties, the current snapshot, ...). A deep copy costs what the metadata weighs,
which grows with every snapshot the table keeps, so an epoch's commit cost more than
its rows, and more as the table aged. :class:`MemoTransaction` keeps the derived
metadata until the table's metadata or the staged updates change (both are replaced,
never mutated, by pyiceberg: a new tuple of updates on each stage, a new metadata object
on each refresh or commit), so a commit derives it only as often as it stages updates,
and derives it without the deep copy: the table's metadata before any update is
returned as is, and the updated metadata shares what the updates left unchanged with
it (pyiceberg's metadata models are frozen and its updates build new lists and maps,
so nothing is shared that anything changes). The updates are applied by pyiceberg's
own ``update_table_metadata`` steps (pinned with pyiceberg 0.12), in the same order,
with the same checks.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pyiceberg.table import Transaction
from pyiceberg.table.update import _apply_table_update, _TableMetadataUpdateContext
from pyiceberg.utils.datetime import datetime_to_millis

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.update import TableUpdate

__all__ = ["MemoTransaction", "derive_metadata"]


def derive_metadata(base: TableMetadata, updates: tuple[TableUpdate, ...]) -> TableMetadata:
    """``base`` with ``updates`` applied, as ``update_table_metadata`` does, without a copy.

    The result shares the parts the updates did not replace with ``base`` (both frozen).
    """
    if not updates:
        return base
    context = _TableMetadataUpdateContext()
    derived = base
    for update in updates:
        derived = _apply_table_update(update, derived, context)
    if context.has_changes() and base.last_updated_ms == derived.last_updated_ms:
        now = datetime_to_millis(datetime.now().astimezone())
        derived = derived.model_copy(update={"last_updated_ms": now})
    derived.spec().check_compatible(derived.schema())
    derived.sort_order().check_compatible(derived.schema())
    return derived


class MemoTransaction(Transaction):
    """A ``Transaction`` whose staged metadata is derived once per table state and update.

    The derived metadata is pyiceberg's frozen model: every reader gets the same object
    and none changes it in place. The catalog applies the committed updates to the
    metadata it holds on its own, as it does for any transaction.
    """

    _memo: tuple[TableMetadata, tuple[TableUpdate, ...], TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        """The table's metadata with the staged updates applied (derived once per change)."""
        base, updates = self._table.metadata, self._updates
        memo = self._memo
        if memo is not None and memo[0] is base and memo[1] is updates:
            return memo[2]
        derived = derive_metadata(base, updates)
        self._memo = (base, updates, derived)
        return derived
