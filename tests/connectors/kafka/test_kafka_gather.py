"""A Kafka source partition gathers small polls into full batches, bounded and resumable.

librdkafka's queue holds ~1,000 records a partition (a queued small record costs it ~470
bytes); the partition gathers what successive polls return until a batch of
``batch_size`` is full, while the log holds more. Gathered records are not emitted, so
the partition's snapshot stays at the first of them and a resume reads them again; a
partition at the end of its log emits what it has at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.records.kafka_concat import concat_raw_batches
from thalweg_bytewax.testing import produce

RECORDS = 12_000
BATCH = 5_000
# A queue of ~1,000 records refilled by fetches of ~16 KiB (~150 of these records).
SMALL_QUEUE = {"queued.min.messages": 1000, "max.partition.fetch.bytes": 16_384}
OFFSET = "_twg_source_offset"


def _topic_of_small_records(bootstrap: str, make_topic: Callable[[], str]) -> str:
    topic = make_topic()
    records = [{"value": b"%0100d" % i, "partition": 0} for i in range(RECORDS)]
    produce(bootstrap, topic, records, config={"batch.num.messages": 100})
    return topic


def _part(bootstrap: str, topic: str, resume: Any = None, **kwargs: Any) -> Any:
    source = KafkaSource(
        [bootstrap], [topic], batch_size=BATCH, librdkafka=SMALL_QUEUE, tail=False, **kwargs
    )
    return source.build_part("in", f"{topic}:0", resume)


def _read_to_end(part: Any) -> list[pa.RecordBatch]:
    """Every batch the partition emits until it ends; polls 50 ms apart (fetches land)."""
    batches: list[pa.RecordBatch] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            out = part.next_batch()
        except StopIteration:
            return batches
        batches.extend(batch for _, batch in out)
        time.sleep(0.05)
    msg = "the partition did not reach its end offset within 60 s"
    raise AssertionError(msg)


def test_small_polls_are_gathered_into_batches_of_batch_size(
    kafka_bootstrap: str, make_topic: Callable[[], str]
) -> None:
    topic = _topic_of_small_records(kafka_bootstrap, make_topic)
    part = _part(kafka_bootstrap, topic)
    try:
        batches = _read_to_end(part)
    finally:
        part.close()
    sizes = [b.num_rows for b in batches]
    # Without gathering each batch is what the ~1,000-record queue held.
    assert sizes.count(BATCH) >= 2, sizes  # noqa: PLR2004
    assert max(sizes) == BATCH
    offsets = pa.concat_arrays([b.column(OFFSET) for b in batches]).to_pylist()
    assert offsets == list(range(RECORDS))  # every record once, in order


def test_gathered_records_stay_out_of_the_snapshot_and_a_resume_reads_them(
    kafka_bootstrap: str, make_topic: Callable[[], str]
) -> None:
    topic = _topic_of_small_records(kafka_bootstrap, make_topic)
    part = _part(kafka_bootstrap, topic)
    try:
        deadline = time.monotonic() + 30
        while not part._gathered and time.monotonic() < deadline:  # noqa: SLF001
            assert part.next_batch() == [], "a full batch was not expected yet"
            time.sleep(0.01)
        assert part._gathered.rows > 0, "the partition was expected to hold records"  # noqa: SLF001
        state = part.snapshot()
    finally:
        part.close()
    assert state["next_offset"] == 0  # nothing emitted: the held records are read again
    resumed = _part(kafka_bootstrap, topic, resume=state)
    try:
        batches = _read_to_end(resumed)
    finally:
        resumed.close()
    offsets = pa.concat_arrays([b.column(OFFSET) for b in batches]).to_pylist()
    assert offsets == list(range(RECORDS))


def test_a_partition_at_the_end_of_its_log_emits_what_it_read_at_once(
    kafka_bootstrap: str, make_topic: Callable[[], str]
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"v%d" % i, "partition": 0} for i in range(10)])
    source = KafkaSource([kafka_bootstrap], [topic], batch_size=BATCH, tail=True)
    part = source.build_part("in", f"{topic}:0", None)
    try:
        deadline = time.monotonic() + 30
        out: list[Any] = []
        while not out and time.monotonic() < deadline:
            out = part.next_batch()
            assert not part._gathered, "records at the log's end were held"  # noqa: SLF001
            time.sleep(0.01)
    finally:
        part.close()
    assert [b.num_rows for _, b in out] == [10]


def test_concatenated_batches_share_their_constant_columns(
    kafka_bootstrap: str, make_topic: Callable[[], str]
) -> None:
    topic = _topic_of_small_records(kafka_bootstrap, make_topic)
    source = KafkaSource([kafka_bootstrap], [topic], batch_size=700, tail=False)
    part = source.build_part("in", f"{topic}:0", None)
    try:
        batches: list[pa.RecordBatch] = []
        deadline = time.monotonic() + 30
        while len(batches) < 3 and time.monotonic() < deadline:  # noqa: PLR2004
            batches.extend(b for _, b in part.next_batch())
            time.sleep(0.01)
    finally:
        part.close()
    joined = concat_raw_batches(batches)
    assert joined.equals(pa.concat_batches(batches))
    # The topic column is cut from the one shared between batches, not copied: two
    # joins hold one buffer.
    again = concat_raw_batches(batches)
    for name in ("_twg_source_topic", "_twg_source_cluster", "_twg_source_producer_id"):
        ours, theirs = joined.column(name).buffers()[-1], again.column(name).buffers()[-1]
        assert ours is not None and theirs is not None, name
        assert ours.address == theirs.address, name
    assert joined.column(OFFSET).buffers()[-1].address != again.column(OFFSET).buffers()[-1].address
