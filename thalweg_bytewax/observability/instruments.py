"""Every metric thalweg exports, defined once: name, kind, unit, attributes, buckets.

Names follow ``thalweg_<noun>_<unit>``; attributes are bounded to ``step_id``,
``topic`` and ``partition`` (plus ``reason`` on rejects, ``rule_id`` on rule warnings),
never keys or record ids.
Bytewax already times ``write_batch`` / ``snapshot`` and counts items per step, so
nothing here re-measures those: these are the domain signals it cannot see (records
rather than batches, rejects by reason, lag, bytes, the durable commit of a sink).

Every counter is exported as an *observable* instrument, read by a callback at
collection time from plain integers (no cost on the hot path): those kept by core
components (``KafkaSourceStats``, ``EpochSinkStats``) and the per-step counts the step
hooks keep. Only the histograms are recorded through the SDK, once per batch, never per
record.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ALL",
    "BATCH_DURATION",
    "BATCH_RECORDS",
    "BATCH_RECORDS_BUCKETS",
    "CONSUMER_LAG",
    "COVERAGE_LAG",
    "CROSSING_RECORDS",
    "HEAP_TRIMS",
    "HEAP_TRIM_RELEASED",
    "LATENCY_BUCKETS_S",
    "REJECTED_RECORDS",
    "RULE_WARNINGS",
    "SINK_COMMIT_DURATION",
    "SINK_COUNTERS",
    "SINK_EPOCHS",
    "SINK_ROWS_SKIPPED",
    "SINK_ROWS_WRITTEN",
    "SOURCE_BATCHES",
    "SOURCE_BYTES",
    "SOURCE_RECORDS",
    "SOURCE_TRANSIENT_ERRORS",
    "STEP_RECORDS_IN",
    "STEP_RECORDS_OUT",
    "InstrumentKind",
    "InstrumentSpec",
]

# Batch work here takes from a fraction of a millisecond (a filter over a small poll)
# to seconds (a commit under load); OTel's default boundaries (0..10000) suit
# milliseconds and would put every batch in the first two buckets.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
"""Histogram boundaries in seconds for per-batch latencies (0.5 ms … 10 s)."""

# A Kafka poll returns 1..batch_size records (10 000 by default); files come in chunks
# up to ~100k rows.
BATCH_RECORDS_BUCKETS: tuple[float, ...] = (
    1, 10, 50, 100, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000,
)  # fmt: skip
"""Histogram boundaries for records per batch."""


class InstrumentKind(StrEnum):
    """How an instrument is recorded."""

    COUNTER = "counter"
    """Added to through the SDK (none is, today: counters are observable)."""
    HISTOGRAM = "histogram"
    """Recorded once per batch (or per commit)."""
    OBSERVABLE_COUNTER = "observable_counter"
    """Read from a core component's plain counter at collection time."""
    OBSERVABLE_GAUGE = "observable_gauge"
    """Read from live state at collection time."""


@dataclass(frozen=True, slots=True)
class InstrumentSpec:
    """One metric: its name, how it is recorded, its unit and its attributes.

    Attributes:
        name: The exported name (``thalweg_<noun>_<unit>``).
        kind: How it is recorded.
        unit: UCUM unit (``s``, ``By``, ``{record}``).
        description: What it measures, shown as the Prometheus ``HELP`` line.
        attributes: The attribute keys it carries (bounded).
        buckets: Histogram boundaries, for histograms only.
    """

    name: str
    kind: InstrumentKind
    unit: str
    description: str
    attributes: tuple[str, ...]
    buckets: tuple[float, ...] | None = None


_PART = ("step_id", "topic", "partition")
_STEP = ("step_id",)

SOURCE_RECORDS = InstrumentSpec(
    "thalweg_source_records_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "{record}",
    "Records emitted by a source partition",
    _PART,
)
"""Records read per source partition (``KafkaSourceStats.records``)."""
SOURCE_BYTES = InstrumentSpec(
    "thalweg_source_bytes_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "By",
    "Arrow bytes of the batches emitted by a source partition",
    _PART,
)
"""Bytes read per source partition (``KafkaSourceStats.bytes``)."""
SOURCE_BATCHES = InstrumentSpec(
    "thalweg_source_batches_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "{batch}",
    "Batches emitted by a source partition",
    _PART,
)
"""Batches per source partition (``KafkaSourceStats.batches``)."""
SOURCE_TRANSIENT_ERRORS = InstrumentSpec(
    "thalweg_source_transient_errors_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "{error}",
    "Transient broker or client errors a source partition backed off from",
    _PART,
)
"""Transient errors per source partition (``KafkaSourceStats.transient_errors``)."""
CONSUMER_LAG = InstrumentSpec(
    "thalweg_consumer_lag_records",
    InstrumentKind.OBSERVABLE_GAUGE,
    "{record}",
    "Records between a source partition's high watermark and its next offset",
    _PART,
)
"""Consumer lag per partition, from librdkafka's cached high watermark."""
STEP_RECORDS_IN = InstrumentSpec(
    "thalweg_step_records_in_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "{record}",
    "Records that entered a step (decode, validate)",
    _STEP,
)
"""Records in per step (Bytewax counts batches, not records)."""
STEP_RECORDS_OUT = InstrumentSpec(
    "thalweg_step_records_out_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "{record}",
    "Records a step passed on downstream",
    _STEP,
)
"""Records out per step."""
REJECTED_RECORDS = InstrumentSpec(
    "thalweg_rejected_records_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "{record}",
    "Records a step sent to the DLQ, by reason (decode, contract, dq)",
    ("step_id", "reason"),
)
"""Rejects (DLQ records) per step and reason; drops are in − out − rejected."""
RULE_WARNINGS = InstrumentSpec(
    "thalweg_rule_warnings_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "{record}",
    "Records that failed a rule of severity warning or info (passed on, not rejected), by rule",
    ("step_id", "rule_id"),
)
"""Failures of reporting (``warning``/``info``) rules per step and rule id."""
BATCH_RECORDS = InstrumentSpec(
    "thalweg_batch_records",
    InstrumentKind.HISTOGRAM,
    "{record}",
    "Records per batch entering a step or leaving a source",
    _STEP,
    BATCH_RECORDS_BUCKETS,
)
"""Batch size histogram per step."""
BATCH_DURATION = InstrumentSpec(
    "thalweg_batch_duration_seconds",
    InstrumentKind.HISTOGRAM,
    "s",
    "Time a step spent on one batch (decode, validate)",
    _STEP,
    LATENCY_BUCKETS_S,
)
"""Per-batch latency histogram per step."""
SINK_COMMIT_DURATION = InstrumentSpec(
    "thalweg_sink_commit_duration_seconds",
    InstrumentKind.HISTOGRAM,
    "s",
    "Duration of a sink's durable commit of one epoch (flush, fsync + rename, COMMIT)",
    _STEP,
    LATENCY_BUCKETS_S,
)
"""The epoch commit alone (Bytewax's snapshot timing also holds coverage recording)."""
SINK_ROWS_WRITTEN = InstrumentSpec(
    "thalweg_sink_rows_written_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "{record}",
    "Rows a sink staged for writing (published at their epoch's commit)",
    _STEP,
)
"""``EpochSinkStats.rows_written``, summed over the sink's partitions."""
SINK_ROWS_SKIPPED = InstrumentSpec(
    "thalweg_sink_replay_skipped_rows_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "{record}",
    "Replayed rows a sink skipped because its target already held them",
    _STEP,
)
"""``EpochSinkStats.rows_skipped_replay``."""
SINK_EPOCHS = InstrumentSpec(
    "thalweg_sink_epochs_committed_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "{epoch}",
    "Epochs whose commit returned",
    _STEP,
)
"""``EpochSinkStats.epochs_committed``."""
SINK_COUNTERS = InstrumentSpec(
    "thalweg_sink_counter_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "1",
    "A sink's own counters, by name: Iceberg commits, commit retries, data files written "
    "and snapshots expired; files a lane finalized; the Kafka sink's records and bytes "
    "produced, queue-full waits, records read back, transactions committed and aborted; "
    "the Flight sink's ack lane batches sent, confirms, blocked sends and reconnects",
    ("step_id", "counter"),
)
"""``EpochSinkStats.own_counters()``, summed over the sink's partitions."""
COVERAGE_LAG = InstrumentSpec(
    "thalweg_coverage_lag_records",
    InstrumentKind.OBSERVABLE_GAUGE,
    "{record}",
    "Records between a source partition's high watermark and what a sink committed",
    _PART,
)
"""Coverage lag per sink and source partition read in this process."""

CROSSING_RECORDS = InstrumentSpec(
    "thalweg_crossing_records_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "{record}",
    "Records that left the worker reading their source partition: pickled to another "
    "process, or handed to another worker of this one",
    ("kind",),
)
"""Records pickled (``kind="pickled"``) or handed over (``kind="handed_over"``), per process."""

HEAP_TRIMS = InstrumentSpec(
    "thalweg_heap_trims_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "{trim}",
    "Trims of the C heap (malloc_trim) the process's Kafka sources made as they read",
    (),
)
"""``heap_trim_stats().trims``: see :mod:`thalweg_bytewax.system.heap_trim`."""

HEAP_TRIM_RELEASED = InstrumentSpec(
    "thalweg_heap_trim_released_bytes_total",
    InstrumentKind.OBSERVABLE_COUNTER,
    "By",
    "Resident memory the C heap's trims gave back to the kernel (RSS before less after)",
    (),
)
"""``heap_trim_stats().released_bytes``."""

ALL: tuple[InstrumentSpec, ...] = (
    SOURCE_RECORDS,
    SOURCE_BYTES,
    SOURCE_BATCHES,
    SOURCE_TRANSIENT_ERRORS,
    CONSUMER_LAG,
    STEP_RECORDS_IN,
    STEP_RECORDS_OUT,
    REJECTED_RECORDS,
    RULE_WARNINGS,
    BATCH_RECORDS,
    BATCH_DURATION,
    SINK_COMMIT_DURATION,
    SINK_ROWS_WRITTEN,
    SINK_ROWS_SKIPPED,
    SINK_EPOCHS,
    SINK_COUNTERS,
    COVERAGE_LAG,
    CROSSING_RECORDS,
    HEAP_TRIMS,
    HEAP_TRIM_RELEASED,
)
"""Every instrument, in the order the operations page lists them."""
