"""Private: the counters of an Iceberg sink partition."""

from __future__ import annotations

from thalweg_bytewax.runtime.epoch_sink import EpochSinkStats

__all__ = ["IcebergSinkStats"]


class IcebergSinkStats(EpochSinkStats):
    """Plain counters of one Iceberg sink partition, exported by the observability layer.

    Attributes:
        commits: Iceberg commits made (one per epoch with rows).
        commit_retries: Commits retried after losing a race with another writer.
        data_files_written: Parquet data files written (published at their commit).
        snapshots_expired: Old snapshots the commits expired (``keep_snapshots``).
    """

    __slots__ = ("commit_retries", "commits", "data_files_written", "snapshots_expired")

    def __init__(self) -> None:
        super().__init__()
        self.commits = 0
        self.commit_retries = 0
        self.data_files_written = 0
        self.snapshots_expired = 0
