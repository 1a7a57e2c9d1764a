"""Plain counters of a ``KafkaSource``, per partition, for the observability layer.

Counters only ever grow, including across a partition rebuilt in the same process, so
an exporter can publish them as monotonic counters.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["KafkaSourceStats"]


class KafkaSourceStats:
    """Counters of one topic-partition read by a ``KafkaSource`` in this process.

    Reach them through :attr:`KafkaSource.stats` (per partition key) or
    :meth:`KafkaSource.total_stats` (summed over the partitions of this process).

    Attributes:
        records: Records emitted.
        bytes: Arrow bytes of the batches emitted.
        batches: Batches emitted.
        transient_errors: Transient broker or client errors seen and backed off.
        offsets_skipped: Offsets the partition moved past without a record: records of
            aborted transactions (under ``read_committed``), transaction markers, and
            records removed by compaction or retention.
    """

    __slots__ = ("batches", "bytes", "offsets_skipped", "records", "transient_errors")

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0
        self.batches = 0
        self.transient_errors = 0
        self.offsets_skipped = 0

    @classmethod
    def sum(cls, parts: Iterable[KafkaSourceStats]) -> KafkaSourceStats:
        """The counters of ``parts`` added up, as a new object."""
        total = cls()
        for s in parts:
            total.records += s.records
            total.bytes += s.bytes
            total.batches += s.batches
            total.transient_errors += s.transient_errors
            total.offsets_skipped += s.offsets_skipped
        return total

    def __repr__(self) -> str:
        return (
            f"KafkaSourceStats(records={self.records}, bytes={self.bytes}, "
            f"batches={self.batches}, transient_errors={self.transient_errors}, "
            f"offsets_skipped={self.offsets_skipped})"
        )
