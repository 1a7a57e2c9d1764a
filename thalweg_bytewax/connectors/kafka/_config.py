"""Private: the validated configuration of a ``KafkaSource`` and its librdkafka settings.

``KafkaSource`` checks its arguments once, by name (``_args``), into a frozen
:class:`SourceConfig`; partitions and the metadata view read only that object. The
librdkafka property names thalweg sets live here as constants, in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import MetadataColumns, metadata_columns

from ._args import (
    check_bool,
    check_config,
    check_interval,
    check_names,
    check_optional_interval,
    check_positive_int,
    check_rate,
    check_starting_offset,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_BATCH_BYTES",
    "DEFAULT_PARTITION_CHECK_INTERVAL",
    "DEFAULT_PREFETCH_BUDGET",
    "DEFAULT_UNREACHABLE_TIMEOUT",
    "IsolationLevel",
    "SourceConfig",
    "StartingOffset",
    "consumer_config",
    "source_config",
]

StartingOffset = Literal["earliest", "latest"] | int | datetime
"""Where a partition without resume state starts: the beginning, the end, an absolute
offset, or the first record at or after a timestamp."""

IsolationLevel = Literal["read_committed", "read_uncommitted"]
"""Which records of transactional producers a source reads: only committed ones (records
of aborted transactions are skipped, and reading waits at the first open transaction)
or every record as written."""
_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")

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
LOG_LEVEL = "log_level"
ISOLATION_LEVEL = "isolation.level"

# With librdkafka's default of 1000 ms a fast consumer stalls for a second whenever its
# local queue passes its threshold; measured here it cut a bare consume() loop from
# ~860k to ~200k records/s. 10 ms keeps the fetcher busy without spinning.
DEFAULT_FETCH_QUEUE_BACKOFF_MS = 10
# Bounds librdkafka's prefetch per consumer (default 64 MiB); with one consumer per
# partition it is the largest term of a partition's memory bound (docs/connectors/
# kafka.md "Memory"). 4 MiB holds more than one 10k-record poll of ~250-byte records, so
# a poll is served from the queue while the next fetch runs; measured on the raw-lane
# benchmark (native consume, 6 alternated runs), 2, 4 and 16 MiB took the same CPU per
# record (medians 2.5-2.7 us, within the spread), and 32 MiB earlier gained nothing but
# ~90 MB of RSS at 16 partitions. It counts payload bytes only: librdkafka also keeps a
# ~260-byte operation per message and a decompression buffer per record batch (467 bytes
# per queued ~140-byte sample order, measured), so 4 MiB of such records is ~14 MB.
DEFAULT_QUEUED_MAX_MESSAGES_KBYTES = 4 * 1024
# The prefetch of all a source's partitions in a process, shared out evenly: up to 64
# partitions keep the 4 MiB above, 256 get 1 MiB each, so a process's prefetch memory
# stays bounded however many partitions it reads. Each keeps at least 256 KiB (a fetch
# returns whole record batches anyway). Not lower by default: on the decode benchmark
# (plain JSON, 76 partitions, 2 alternated runs each) a 64 MiB budget (~860 KiB a
# partition) cut peak RSS at 600k records from ~590 to ~515 MB but took 0.2-0.6 s more
# CPU (more fetch round trips a record).
DEFAULT_PREFETCH_BUDGET = 256 * 1024 * 1024
MIN_PARTITION_PREFETCH_KBYTES = 256


# The prefetch of one partition in records is one poll (`batch_size`): librdkafka
# stops fetching a partition once its queue holds `queued.min.messages` records or the
# bytes above, whichever comes first (its own default, 100,000 records, never binds
# before 4 MiB of records over ~42 bytes). Small records cost more than their bytes: a
# queued record also holds a ~260-byte operation and its share of the record batch's
# buffer, so 4 MiB of ~95-byte records (~44k) held ~20 MB. A fetch still adds up to
# 1 MiB past the bound, which serves the next poll. Measured on the raw lane (16
# partitions of 60k sample orders, 2 paired runs each): one poll against two, peak RSS
# 378-391 against 443-445 MB, CPU 2.35-3.13 against 2.66-2.83 us a record, wall rate
# within the runs' spread. Never below this many records: with tiny polls
# (`batch_size=10` for latency) a queue refilled only once nearly empty would leave
# polls waiting on the next fetch.
MIN_PREFETCH_RECORDS = 1_000


def partition_prefetch_kbytes(budget: int | None, partitions: int) -> int:
    """``queued.max.messages.kbytes`` of one of ``partitions`` sharing ``budget`` bytes.

    The budget's even share, between 256 KiB and the 4 MiB default; the default alone
    without a budget.
    """
    if budget is None:
        return DEFAULT_QUEUED_MAX_MESSAGES_KBYTES
    share = budget // max(1, partitions) // 1024
    return max(MIN_PARTITION_PREFETCH_KBYTES, min(DEFAULT_QUEUED_MAX_MESSAGES_KBYTES, share))


@dataclass(frozen=True, slots=True)
class SourceConfig:
    """A ``KafkaSource``'s arguments, checked and normalised (times in seconds).

    ``add_config`` may hold credentials: it is left out of the repr.
    """

    brokers: list[str]
    topics: list[str]
    tail: bool
    starting_offset: StartingOffset
    add_config: dict[str, Any] = field(repr=False)
    batch_size: int
    max_batch_bytes: int
    columns: MetadataColumns
    metadata_timeout_s: float
    max_records_per_s: float | None
    partition_check_interval_s: float | None
    fail_on_new_partitions: bool
    isolation_level: IsolationLevel = "read_committed"
    prefetch_budget: int | None = DEFAULT_PREFETCH_BUDGET
    unreachable_timeout_s: float | None = DEFAULT_UNREACHABLE_TIMEOUT.total_seconds()

    def consumer_config(self, partitions: int = 1) -> dict[str, Any]:
        """The librdkafka consumer settings of this source (see :func:`consumer_config`).

        Args:
            partitions: How many partitions share :attr:`prefetch_budget` (the source's
                listing); each consumer's ``queued.max.messages.kbytes`` is their share
                unless ``add_config`` sets it.
        """
        prefetch = partition_prefetch_kbytes(self.prefetch_budget, partitions)
        config = consumer_config(
            self.brokers,
            {
                ISOLATION_LEVEL: self.isolation_level,
                QUEUED_MAX_MESSAGES_KBYTES: prefetch,
                QUEUED_MIN_MESSAGES: max(self.batch_size, MIN_PREFETCH_RECORDS),
            },
        )
        config.update(self.add_config)
        return config


def source_config(
    brokers: object,
    topics: object,
    *,
    tail: object,
    starting_offset: object,
    add_config: object,
    batch_size: object,
    max_batch_bytes: object,
    metadata_prefix: object,
    metadata_timeout: object,
    max_records_per_s: object,
    partition_check_interval: object,
    fail_on_new_partitions: object,
    isolation_level: object = "read_committed",
    prefetch_budget: object = DEFAULT_PREFETCH_BUDGET,
    unreachable_timeout: object = DEFAULT_UNREACHABLE_TIMEOUT,
) -> SourceConfig:
    """Check every argument of ``KafkaSource`` by name and build its configuration.

    A wrong type must not surface as a raw ``TypeError`` later, nor be read as another
    value (``True`` as offset 1).

    Raises:
        ConfigError: On an invalid argument, naming it.
    """
    # Checked in the order of the signature, so the first wrong argument is named.
    brokers_ = check_names(brokers, "brokers")
    # ":" separates topic and partition in partition keys; Kafka refuses it anyway.
    topics_ = check_names(topics, "topics", forbid=":")
    tail_ = check_bool(tail, "tail")
    start = check_starting_offset(starting_offset, "starting_offset")
    add_config_ = check_config(add_config, "add_config")
    batch_size_ = check_positive_int(batch_size, "batch_size")
    max_batch_bytes_ = check_positive_int(max_batch_bytes, "max_batch_bytes")
    columns = metadata_columns(metadata_prefix, "kafka source")
    partition_check = check_optional_interval(partition_check_interval, "partition_check_interval")
    fail_on_new = check_bool(fail_on_new_partitions, "fail_on_new_partitions")
    if isolation_level not in _ISOLATION_LEVELS:
        msg = (
            f"kafka source: `isolation_level` expected one of {', '.join(_ISOLATION_LEVELS)}; "
            f"got {isolation_level!r}"
        )
        raise ConfigError(msg)
    budget = (
        None if prefetch_budget is None else check_positive_int(prefetch_budget, "prefetch_budget")
    )
    unreachable = check_optional_interval(unreachable_timeout, "unreachable_timeout")
    return SourceConfig(
        brokers=brokers_,
        topics=topics_,
        tail=tail_,
        starting_offset=start,  # type: ignore[arg-type]
        add_config=add_config_,
        batch_size=batch_size_,
        max_batch_bytes=max_batch_bytes_,
        columns=columns,
        metadata_timeout_s=check_interval(metadata_timeout, "metadata_timeout"),
        max_records_per_s=check_rate(max_records_per_s, "max_records_per_s"),
        partition_check_interval_s=partition_check,
        fail_on_new_partitions=fail_on_new,
        isolation_level=isolation_level,  # type: ignore[arg-type]
        prefetch_budget=budget,
        unreachable_timeout_s=unreachable,
    )


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
