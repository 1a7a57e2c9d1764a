"""Private: an Iceberg sink's epoch commit, retried when another writer wins the race."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.exceptions import (
    CommitFailedException,
    CommitStateUnknownException,
    ValidationException,
)
from pyiceberg.table.update.snapshot import ExpireSnapshots

from thalweg_bytewax.errors import SinkTerminalError

from ._history import plan_expiry
from ._summary import COMMIT_KEY, landed
from ._transaction import MemoTransaction
from ._upsert import upsert

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table

    from ._stats import IcebergSinkStats
    from .config import IcebergSinkConfig

__all__ = ["commit"]

logger = logging.getLogger("thalweg_bytewax.connectors.iceberg._partition")


def commit(
    table: Table,
    sink: IcebergSinkConfig,
    rows: pa.Table | None,
    props: dict[str, str],
    files: list[DataFile],
    stats: IcebergSinkStats,
) -> Table:
    """Commit an epoch: upsert ``rows``, or append ``files``; the table as committed.

    When the table's history holds more than ``keep_snapshots``, the same transaction
    expires the oldest snapshots and the commit carries what only they held
    (:mod:`._history`). Appends merge the table's manifests when its
    ``commit.manifest-merge.enabled`` property says so. A commit that lost a race with
    another writer is retried on the refreshed table (``commit_retries`` times, the
    expiry planned again), unless the refreshed ancestry shows it landed.

    Raises:
        SinkTerminalError: When every attempt lost; nothing of the epoch is published.
    """
    failure: Exception | None = None
    for attempt in range(sink.commit_retries + 1):
        try:
            expiry = plan_expiry(table.metadata, sink.keep_snapshots)
            summary = {**expiry.carried, **props} if expiry is not None else props
            with MemoTransaction(table) as tx:
                if rows is not None:
                    upsert(tx, table, rows, list(sink.key_columns), summary)
                else:
                    snapshot = tx.update_snapshot(snapshot_properties=summary)
                    with snapshot.merge_append() as append:
                        for data_file in files:
                            append.append_data_file(data_file)
                if expiry is not None:
                    ExpireSnapshots(tx).by_ids(expiry.expired).commit()
        except (CommitFailedException, CommitStateUnknownException) as exc:
            failure = exc
        except ValidationException as exc:
            # pyiceberg's own retry of an upsert found files another writer added
            # whose key ranges may overlap (file statistics, not rows): redo the
            # upsert on the refreshed table, which matches against its rows.
            failure = exc
        else:
            stats.commits += 1
            stats.snapshots_expired += len(expiry.expired) if expiry is not None else 0
            return table  # the commit left the table at the metadata it committed
        table = table.refresh()
        if landed(table, props[COMMIT_KEY]):
            stats.commits += 1
            return table
        stats.commit_retries += 1
        logger.info(
            "iceberg sink: table `%s` commit lost a race with another writer "
            "(attempt %s of %s); retrying on the refreshed table",
            sink.table,
            attempt + 1,
            sink.commit_retries + 1,
        )
        time.sleep(min(0.05 * 2**attempt, 2.0))
    reason = type(failure).__name__ if failure is not None else "no attempt"
    msg = (
        f"iceberg sink: table `{sink.table}`: the epoch's commit failed "
        f"{sink.commit_retries + 1} times ({reason}); expected it to win a "
        f"retry; nothing of the epoch was published and it replays on restart (fewer "
        f"`shards`, or a longer epoch, means fewer concurrent commits)"
    )
    raise SinkTerminalError(msg)
