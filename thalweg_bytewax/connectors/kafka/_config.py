"""Private: the defaults of a ``KafkaSource`` and the librdkafka settings thalweg sets.

The settings themselves are :class:`~thalweg_bytewax.connectors.kafka.config.KafkaSourceConfig`
(module ``config``); the librdkafka property names thalweg sets live here as constants,
in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_FETCH_WAIT_MAX_MS",
    "DEFAULT_MAX_BATCH_BYTES",
    "DEFAULT_MAX_PARTITION_FETCH_BYTES",
    "DEFAULT_PARTITION_CHECK_INTERVAL",
    "DEFAULT_PREFETCH_BUDGET",
    "DEFAULT_UNREACHABLE_TIMEOUT",
    "IsolationLevel",
    "StartingOffset",
    "consumer_config",
    "partition_prefetch_kbytes",
    "partition_prefetch_records",
]

StartingOffset = Literal["earliest", "latest"] | int | datetime
"""Where a partition without resume state starts: the beginning, the end, an absolute
offset, or the first record at or after a timestamp."""

IsolationLevel = Literal["read_committed", "read_uncommitted"]
"""Which records of transactional producers a source reads: only committed ones (records
of aborted transactions are skipped, and reading waits at the first open transaction)
or every record as written."""

# 10k records per poll amortises the per-batch cost (Arrow assembly, Bytewax step
# overhead) while one poll of small records stays a few MiB; see docs/benchmarks.md.
DEFAULT_BATCH_SIZE = 10_000
# Byte budget per emitted batch; keeps a batch of large records far below Arrow's 2 GiB
# binary-array limit and bounds the memory of one item in flight.
DEFAULT_MAX_BATCH_BYTES = 32 * 1024 * 1024
# A metadata request every 30 s per source and process costs the brokers nothing
# (librdkafka refreshes its own metadata every 5 min by default) and notices a new
# partition well before anyone would.
DEFAULT_PARTITION_CHECK_INTERVAL = timedelta(seconds=30)
# A bounded run fails when a partition has read nothing for this long while the client
# reports the brokers unreachable: a broker restart or leader election takes seconds,
# and librdkafka would otherwise retry forever, so the run would never end.
DEFAULT_UNREACHABLE_TIMEOUT = timedelta(seconds=60)

# librdkafka property names used by this package, in one place.
BOOTSTRAP_SERVERS = "bootstrap.servers"
GROUP_ID = "group.id"
ENABLE_AUTO_COMMIT = "enable.auto.commit"
ENABLE_AUTO_OFFSET_STORE = "enable.auto.offset.store"
AUTO_OFFSET_RESET = "auto.offset.reset"
FETCH_QUEUE_BACKOFF_MS = "fetch.queue.backoff.ms"
QUEUED_MAX_MESSAGES_KBYTES = "queued.max.messages.kbytes"
QUEUED_MIN_MESSAGES = "queued.min.messages"
MAX_PARTITION_FETCH_BYTES = "max.partition.fetch.bytes"
FETCH_WAIT_MAX_MS = "fetch.wait.max.ms"
LOG_LEVEL = "log_level"
SASL_PASSWORD = "sasl.password"  # noqa: S105 - a property name, not a password
ISOLATION_LEVEL = "isolation.level"

# With librdkafka's default of 1000 ms a fast consumer stalls for a second whenever its
# local queue passes its threshold; measured here it cut a bare consume() loop from
# ~860k to ~200k records/s. 10 ms keeps the fetcher busy without spinning.
DEFAULT_FETCH_QUEUE_BACKOFF_MS = 10
# Bounds librdkafka's prefetch per partition (its own default is 64 MiB); it is the
# largest term of a partition's memory bound (docs/connectors/kafka.md "Memory"). 4 MiB
# holds more than one 10k-record poll of ~250-byte records, so a poll is served from
# the queue while the next fetch runs; measured on the raw-lane benchmark (native
# consume, 6 alternated runs), 2, 4 and 16 MiB took the same CPU per
# record (medians 2.5-2.7 us, within the spread), and 32 MiB earlier gained nothing but
# ~90 MB of RSS at 16 partitions. It counts payload bytes only: librdkafka also keeps a
# ~260-byte operation per message and a decompression buffer per record batch (467 bytes
# per queued ~140-byte sample order, measured), so 4 MiB of such records is ~14 MB.
DEFAULT_QUEUED_MAX_MESSAGES_KBYTES = 4 * 1024
# The prefetch of all a source's partitions in a process, shared out evenly, in bytes
# and in records (`PREFETCH_BYTES_PER_RECORD`): up to 51 partitions keep 4 MiB and one
# 10k-record poll each, 64 get 4 MiB and 8,192 records, 256 get 1 MiB and 2,048, so a
# process's prefetch memory stays bounded however many partitions it reads. Each keeps
# at least 256 KiB and 1,000 records (a fetch returns whole record batches anyway). Not
# lower by default: on the decode memory benchmark (16 partitions of 30k plain Avro
# orders, zstd, 3 alternated runs each) 16 MiB (1 MiB and 2,048 records a partition)
# cut peak RSS from 428 to 326 MB but took 9.15 against 6.55 us of CPU a record, and
# 32 MiB (4,096 records) 363 MB at 7.55 us: smaller polls, more work a record. Earlier,
# on the decode benchmark (plain JSON, 76 partitions) a 64 MiB budget took 0.2-0.6 s
# more CPU than 256 MiB.
DEFAULT_PREFETCH_BUDGET = 256 * 1024 * 1024
MIN_PARTITION_PREFETCH_KBYTES = 256
# What a queued small record costs librdkafka beyond its payload's share of the byte
# bound: a ~260-byte operation and its share of the decompressed record batch (467
# bytes a ~140-byte sample order, measured). The budget's share of a partition in
# records is its share in bytes over this.
PREFETCH_BYTES_PER_RECORD = 512


# The prefetch of one partition in records: librdkafka stops fetching a partition once
# its queue holds `queued.min.messages` records or the bytes above, whichever comes
# first (its own default, 100,000 records, never binds before 4 MiB of records over
# ~42 bytes). Small records cost more than their bytes: a queued record also holds a
# ~260-byte operation and its share of the record batch's buffer, ~470 bytes a ~95-byte
# record, where the partition holds the same record in ~150 (`_gather`). So the queue
# holds a few thousand records and the partition gathers successive polls into one
# batch of `batch_size`, rather than the queue holding a whole batch (the default
# before: one 10,000-record poll a partition). Measured on the decode memory benchmark
# (16 partitions of 30k plain Avro orders, zstd, 2 alternated runs each): 1,000 records
# a partition with gathering against one poll, peak RSS 286-290 against 436-461 MB
# (with the Parquet sink's 16 MiB buffer), CPU 5.26-5.33 against 4.92-5.21 us a record.
# A fetch still adds up to `max.partition.fetch.bytes` past the bound (the next polls';
# DEFAULT_MAX_PARTITION_FETCH_BYTES below).
# Never below MIN_PREFETCH_RECORDS: with tiny polls (`batch_size=10` for latency) a
# queue refilled only once nearly empty would leave polls waiting on the next fetch.
PARTITION_PREFETCH_RECORDS = 1_000
MIN_PREFETCH_RECORDS = 1_000

# What one fetch of a partition may add past the bounds above, as stored. librdkafka
# decompresses each record batch it fetches into a buffer of its own and adds a ~130-byte
# operation a record, so with small records in zstd batches a fetch holds several times
# its size: at librdkafka's 1 MiB a partition of ~90-byte Avro orders held ~8 MB, and a
# source's partitions, all fetched at once at start-up, held the whole topic (heaptrack
# on Apache Kafka: 65 MB of decompression buffers and 62 MB of operations for 480,000
# records). Measured on the decode memory benchmark (Apache Kafka 4.1, 16 partitions of
# 120,000 plain Avro orders, zstd, 2 alternated runs each): 256 KiB with the wait below
# peaked at 324-331 MB against 386-389 at librdkafka's defaults, at 2.89-2.93 against
# 2.87-2.88 us of CPU a record and 461-498k against 454-468k records/s. A record batch
# larger than this is still fetched whole (one at a time).
DEFAULT_MAX_PARTITION_FETCH_BYTES = 256 * 1024
# How long the broker may hold a fetch that found nothing new. The partitions of a
# process share one librdkafka handle, which has one fetch in flight per broker: at
# librdkafka's 500 ms a fetch for caught-up partitions alone held back the next fetch of
# a partition that had drained its queue: with 256 KiB fetches the same runs read
# 341-372k records/s, at 100 ms 461-498k (20 ms: 489-498k). The cost is an empty answer
# every 100 ms a handle and broker while caught up: measured on an idle 16-partition
# source, ~1 % of a broker core more than at 500 ms (20 ms: ~6 %), and the same CPU in
# the process.
DEFAULT_FETCH_WAIT_MAX_MS = 100


def partition_prefetch_kbytes(budget: int | None, partitions: int) -> int:
    """``queued.max.messages.kbytes`` of one of ``partitions`` sharing ``budget`` bytes.

    The budget's even share, between 256 KiB and the 4 MiB default; the default alone
    without a budget.
    """
    if budget is None:
        return DEFAULT_QUEUED_MAX_MESSAGES_KBYTES
    share = budget // max(1, partitions) // 1024
    return max(MIN_PARTITION_PREFETCH_KBYTES, min(DEFAULT_QUEUED_MAX_MESSAGES_KBYTES, share))


def partition_prefetch_records(budget: int | None, partitions: int, batch_size: int) -> int:
    """``queued.min.messages`` of one of ``partitions`` sharing ``budget`` bytes.

    :data:`PARTITION_PREFETCH_RECORDS` (or ``batch_size`` if smaller) without a budget;
    with one, also at most the budget's even share over
    :data:`PREFETCH_BYTES_PER_RECORD`; never below :data:`MIN_PREFETCH_RECORDS`. The
    partition gathers polls into batches of ``batch_size`` (``_gather``), so its queue
    need not hold one.
    """
    records = min(batch_size, PARTITION_PREFETCH_RECORDS)
    if budget is not None:
        records = min(records, budget // max(1, partitions) // PREFETCH_BYTES_PER_RECORD)
    return max(MIN_PREFETCH_RECORDS, records)


def consumer_config(brokers: Sequence[str], add_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The librdkafka consumer settings: our defaults, then the user's, which win."""
    config: dict[str, Any] = {
        BOOTSTRAP_SERVERS: ",".join(brokers),
        # Partitions are assigned explicitly and positions live in Bytewax recovery
        # state, so no consumer group is joined and nothing is committed to Kafka.
        GROUP_ID: "thalweg-bytewax-unused",
        ENABLE_AUTO_COMMIT: False,
        ENABLE_AUTO_OFFSET_STORE: False,
        # A resume position that retention already deleted must fail loudly, never
        # jump silently to the end (librdkafka's default) and lose the gap.
        AUTO_OFFSET_RESET: "error",
        FETCH_QUEUE_BACKOFF_MS: DEFAULT_FETCH_QUEUE_BACKOFF_MS,
        QUEUED_MAX_MESSAGES_KBYTES: DEFAULT_QUEUED_MAX_MESSAGES_KBYTES,
        LOG_LEVEL: 3,
    }
    config.update(add_config or {})
    return config
