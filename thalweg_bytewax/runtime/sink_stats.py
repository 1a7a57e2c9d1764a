"""The plain counters an epoch sink partition keeps, read by the observability layer."""

from __future__ import annotations

__all__ = ["EpochSinkStats"]


class EpochSinkStats:
    """Plain counters of one sink partition, exported by the observability layer.

    Attributes:
        rows_written: Rows staged for writing (published at their epoch's commit).
        rows_skipped_replay: Replayed rows skipped because the target already holds them.
        epochs_committed: Epochs whose commit returned.
    """

    __slots__ = ("epochs_committed", "rows_skipped_replay", "rows_written")

    def __init__(self) -> None:
        self.rows_written = 0
        self.rows_skipped_replay = 0
        self.epochs_committed = 0
