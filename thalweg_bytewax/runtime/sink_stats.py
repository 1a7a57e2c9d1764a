"""The plain counters an epoch sink partition keeps, read by the observability layer."""

from __future__ import annotations

from typing import ClassVar

__all__ = ["EpochSinkStats"]


class EpochSinkStats:
    """Plain counters of one sink partition, exported by the observability layer.

    Attributes:
        rows_written: Rows staged for writing (published at their epoch's commit).
        rows_skipped_replay: Replayed rows skipped because the target already holds them.
        epochs_committed: Epochs whose commit returned.
    """

    __slots__ = ("epochs_committed", "rows_skipped_replay", "rows_written")

    COMMON: ClassVar[tuple[str, ...]] = ("rows_written", "rows_skipped_replay", "epochs_committed")
    """The counters every epoch sink keeps (each exported as its own metric)."""

    def __init__(self) -> None:
        self.rows_written = 0
        self.rows_skipped_replay = 0
        self.epochs_committed = 0

    def own_counters(self) -> dict[str, int]:
        """The counters a sink's class adds to :attr:`COMMON`, by name, each only growing.

        Every integer slot a subclass declares: the Iceberg sink's ``commits``,
        ``commit_retries``, ``data_files_written`` and ``snapshots_expired``, a lane's
        ``files_finalized``, the Kafka sink's ``records_produced``... A new counter on a
        sink's stats class is exported without touching the observability layer.
        """
        counters: dict[str, int] = {}
        for cls in reversed(type(self).__mro__):
            if cls is EpochSinkStats or not issubclass(cls, EpochSinkStats):
                continue
            for name in cls.__dict__.get("__slots__", ()):
                value = getattr(self, name, None)
                if type(value) is int:  # not a bool, not a nested stats object
                    counters[name] = value
        return counters
