"""Plain counters of a ``KafkaSource`` and a ``KafkaSink``, per partition, for observability.

Counters only ever grow, including across a partition rebuilt in the same process, so
an exporter can publish them as monotonic counters.
"""

from __future__ import annotations

from collections.abc import Iterable

from thalweg_bytewax.runtime.sink_stats import EpochSinkStats

__all__ = ["KafkaSinkStats", "KafkaSourceStats"]


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


class KafkaSinkStats(EpochSinkStats):
    """Plain counters of one ``KafkaSink`` partition, exported by the observability layer.

    Attributes:
        records_produced: Records handed to the producer.
        bytes_produced: Value bytes handed to the producer.
        queue_full_waits: Times the bounded local queue was full and produce waited.
        records_read_back: Records read back from the topic to reconcile on resume.
        transactions_committed: Epoch transactions committed (``transactional=True``).
        transactions_aborted: Epoch transactions aborted after a failure.
    """

    __slots__ = (
        "bytes_produced",
        "queue_full_waits",
        "records_produced",
        "records_read_back",
        "transactions_aborted",
        "transactions_committed",
    )

    def __init__(self) -> None:
        super().__init__()
        self.records_produced = 0
        self.bytes_produced = 0
        self.queue_full_waits = 0
        self.records_read_back = 0
        self.transactions_committed = 0
        self.transactions_aborted = 0
