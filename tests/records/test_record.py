"""The record model: RawRecord <-> RawBatch round trips and the deterministic record id."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime
from typing import TypedDict, cast
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import thalweg_bytewax.records.ids as ids_mod
from thalweg_bytewax.errors import ConfigError, SourceError, ThalwegError
from thalweg_bytewax.records.batches import (
    raw_batch_from_columns,
    raw_batch_from_records,
    records_from_raw_batch,
)
from thalweg_bytewax.records.ids import record_id, record_ids, record_ids_array
from thalweg_bytewax.records.metadata import MetadataColumns, MetadataPolicy
from thalweg_bytewax.records.model import Locator, RawRecord, TimestampType


class RecordIdInputs(TypedDict):
    """The arguments of `record_id`, by name."""

    cluster: str | None
    topic: str
    partition: int
    offset: int
    value: bytes | None


class RecordIdChange(TypedDict, total=False):
    """Some of the arguments of `record_id`, by name."""

    cluster: str | None
    topic: str
    partition: int
    offset: int
    value: bytes | None


BASE: RecordIdInputs = {
    "cluster": "c1",
    "topic": "orders",
    "partition": 3,
    "offset": 42,
    "value": b"payload",
}


def test_record_id_is_deterministic_across_calls_and_processes() -> None:
    # A fixed expected digest pins the recipe: a change here changes every stored id.
    rid = record_id(**BASE)
    assert rid == record_id(**BASE)
    assert len(rid) == 16
    assert rid.hex() == "a3fb461693a1ad6fa7a82389201d77df"


@pytest.mark.parametrize(
    "change",
    [
        {"cluster": "c2"},
        {"cluster": None},
        {"cluster": ""},
        {"topic": "orders2"},
        {"partition": 4},
        {"offset": 43},
        {"value": b"payload!"},
        {"value": b""},
        {"value": None},
    ],
)
def test_record_id_differs_when_any_input_differs(change: RecordIdChange) -> None:
    changed: RecordIdInputs = {**BASE, **change}
    assert record_id(**changed) != record_id(**BASE)


def test_record_id_null_and_empty_cluster_and_value_are_distinct() -> None:
    assert record_id(None, "t", 0, 0, None) != record_id("", "t", 0, 0, None)
    assert record_id("c", "t", 0, 0, None) != record_id("c", "t", 0, 0, b"")


def test_record_id_has_no_field_boundary_ambiguity() -> None:
    # Length-prefixing: moving bytes between topic and cluster must change the id.
    assert record_id("ab", "c", 0, 0, b"") != record_id("a", "bc", 0, 0, b"")


@given(
    offsets=st.lists(st.integers(0, 2**62), min_size=1, max_size=20),
    data=st.data(),
)
def test_batch_record_ids_equal_single_record_ids(offsets: list[int], data: st.DataObject) -> None:
    values = data.draw(
        st.lists(st.none() | st.binary(max_size=64), min_size=len(offsets), max_size=len(offsets))
    )
    batch = record_ids("c", "t", 1, offsets, values)
    assert batch == [record_id("c", "t", 1, o, v) for o, v in zip(offsets, values, strict=True)]


@pytest.mark.parametrize("native", [True, False], ids=["native", "hashlib"])
@given(
    cluster=st.none() | st.text(max_size=5),
    topic=st.text(max_size=8),
    partition=st.integers(-(2**31), 2**31 - 1),
    rows=st.lists(
        st.tuples(st.integers(-(2**63), 2**63 - 1), st.none() | st.binary(max_size=300)),
        max_size=30,
    ),
    cut=st.integers(0, 5),
)
def test_record_ids_of_arrow_columns_equal_single_record_ids(
    native: bool,
    cluster: str | None,
    topic: str,
    partition: int,
    rows: list[tuple[int, bytes | None]],
    cut: int,
) -> None:
    # Sliced arrays too: the native path reads Arrow buffers at the array's offset.
    offsets = pa.array([o for o, _ in rows], pa.int64()).slice(min(cut, len(rows)))
    values = pa.array([v for _, v in rows], pa.binary()).slice(min(cut, len(rows)))
    expected = [record_id(cluster, topic, partition, o, v) for o, v in rows[min(cut, len(rows)) :]]
    if native:
        # `_native_ids` is a private import of the module, read from its namespace.
        native_ids = vars(ids_mod)["_native_ids"]
        assert native_ids is not None, "built without OpenSSL's headers"
        got = record_ids_array(cluster, topic, partition, offsets, values)
    else:
        # What a build without OpenSSL's headers runs.
        with mock.patch.object(ids_mod, "_native_ids", None):
            got = record_ids_array(cluster, topic, partition, offsets, values)
    assert got.type == pa.binary(16)
    assert got.to_pylist() == expected


@pytest.mark.slow
def test_record_id_is_stable_in_a_fresh_interpreter() -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from thalweg_bytewax.records import record_id;"
            "print(record_id('c1','orders',3,42,b'payload').hex())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == record_id(**BASE).hex()


headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=5
).map(tuple)

records_st = st.builds(
    RawRecord,
    locator=st.builds(
        Locator,
        topic=st.text(min_size=1, max_size=20),
        partition=st.integers(0, 1000),
        offset=st.integers(0, 2**62),
        cluster=st.none() | st.text(max_size=10),
        leader_epoch=st.none() | st.integers(0, 2**31 - 1),
    ),
    key=st.none() | st.binary(max_size=32),
    value=st.none() | st.binary(max_size=64),
    headers=headers_st,
    timestamp_ms=st.none() | st.integers(-(2**40), 2**45),
    timestamp_type=st.sampled_from(list(TimestampType)),
    producer_id=st.none() | st.integers(0, 2**62),
    producer_epoch=st.none() | st.integers(0, 2**15 - 1),
    base_sequence=st.none() | st.integers(0, 2**31 - 1),
    ingest_ts=st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    ),
)


@given(st.lists(records_st, min_size=1, max_size=10))
def test_raw_batch_round_trips_every_field(records: list[RawRecord]) -> None:
    records = [r.with_record_id() for r in records]
    batch = raw_batch_from_records(records)
    assert batch.schema == MetadataColumns().raw_schema
    back = records_from_raw_batch(batch)
    assert back == records


def test_metadata_prefix_is_configurable_and_validated() -> None:
    cols = MetadataColumns("_meta_")
    assert cols.source_offset == "_meta_source_offset"
    assert all(n.startswith("_meta_") for n in cols.raw_schema.names)
    with pytest.raises(ConfigError, match="metadata prefix"):
        MetadataColumns("bad prefix;")


def test_policy_columns() -> None:
    cols = MetadataColumns()
    assert cols.policy_columns(MetadataPolicy.NONE) == []
    assert cols.policy_columns("locator") == [
        "_twg_source_topic",
        "_twg_source_partition",
        "_twg_source_offset",
        "_twg_record_id",
    ]
    everything = cols.policy_columns("all")
    assert "_twg_source_value" not in everything and "_twg_source_headers" in everything


def test_headers_keep_order_duplicates_and_nulls() -> None:
    rec = RawRecord(
        Locator("t", 0, 0), b"k", b"v", (("a", b"1"), ("a", None), ("b", b""), ("a", b"2"))
    )
    batch = raw_batch_from_records([rec])
    assert batch.column("_twg_source_headers").to_pylist() == [
        [
            {"key": "a", "value": b"1"},
            {"key": "a", "value": None},
            {"key": "b", "value": b""},
            {"key": "a", "value": b"2"},
        ]
    ]
    assert isinstance(batch.column("_twg_source_headers"), pa.ListArray)


@pytest.mark.parametrize("exc", [ConfigError("bad `x`"), SourceError("down"), ThalwegError("x")])
def test_errors_pickle_round_trip(exc: ThalwegError) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and back.args == exc.args


def test_record_ids_of_large_binary_payloads() -> None:
    values = pa.array([b"ab", None, b""], pa.large_binary())
    offsets = pa.array([5, 6, 7], pa.int64())
    got = record_ids_array("c", "t", 0, offsets, values).to_pylist()
    assert got == [
        record_id("c", "t", 0, o, v) for o, v in zip([5, 6, 7], [b"ab", None, b""], strict=True)
    ]


def test_messages_with_bytes_like_payloads_keep_every_byte() -> None:
    # A payload that is a memoryview of wider items has fewer items than bytes: the
    # payload column and the record id must hold all of its bytes.
    import array

    from confluent_kafka import Message

    from thalweg_bytewax.records.kafka_batches import raw_batch_from_messages

    class Msg:
        def __init__(self, offset: int, value: object) -> None:
            self._offset, self._value = offset, value

        def topic(self) -> str:
            return "t"

        def partition(self) -> int:
            return 0

        def offset(self) -> int:
            return self._offset

        def value(self) -> object:
            return self._value

        def key(self) -> None:
            return None

        def timestamp(self) -> tuple[int, int]:
            return (1, 1_700_000_000_000)

        def headers(self) -> None:
            return None

        def leader_epoch(self) -> None:
            return None

    wide = memoryview(array.array("i", [1, 2]))
    values: list[object] = [b"ab", bytearray(b"cd"), wide]
    # Msg stands in for confluent_kafka.Message, whose stubs type value() as bytes only.
    messages = cast("list[Message]", [Msg(i, v) for i, v in enumerate(values)])
    batch = raw_batch_from_messages(messages, cluster="c")
    cols = MetadataColumns()
    expected = [b"ab", b"cd", wide.tobytes()]
    assert batch.column(cols.source_value).to_pylist() == expected
    assert batch.column(cols.record_id).to_pylist() == [
        record_id("c", "t", 0, i, v) for i, v in enumerate(expected)
    ]


def test_the_hashlib_fallback_is_logged_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import thalweg_bytewax._deps as deps

    monkeypatch.setattr(deps, "_LOGGED", set())
    monkeypatch.setattr(ids_mod, "_native_ids", None)
    values, offsets = pa.array([b"a"], pa.binary()), pa.array([0], pa.int64())
    with caplog.at_level("INFO", logger="thalweg_bytewax.records.ids"):
        for _ in range(2):
            got = record_ids_array("c", "t", 0, offsets, values)
    assert got.to_pylist() == [record_id("c", "t", 0, 0, b"a")]
    noted = [r for r in caplog.records if "native hasher is not built" in r.getMessage()]
    assert len(noted) == 1
    assert noted[0].levelname == "WARNING"  # seen without any logging configured


def test_a_small_batch_after_a_large_one_pickles_small_and_holds_its_own_values() -> None:
    # Constant columns (topic, partition, cluster, absent columns) are shared between
    # batches of one length; a small batch must never carry a larger batch's buffers
    # when pickled across processes.
    def batch(topic: str, n: int) -> pa.RecordBatch:
        return raw_batch_from_columns(
            topic=topic,
            partition=3,
            offsets=range(n),
            keys=[None] * n,
            values=[b"v"] * n,
            cluster="c1",
        )

    big = batch("orders", 60_000)
    small = batch("orders", 10)
    again = batch("payments", 10)
    assert small.column("_twg_source_topic").to_pylist() == ["orders"] * 10
    assert again.column("_twg_source_topic").to_pylist() == ["payments"] * 10
    assert small.column("_twg_source_cluster").to_pylist() == ["c1"] * 10
    assert big.column("_twg_source_partition").to_pylist() == [3] * 60_000
    assert len(pickle.dumps(small)) < len(pickle.dumps(big)) // 50
    assert len(pickle.dumps(small)) < 20_000


@pytest.mark.parametrize("lengths", [[10_000, 3_477, 7_500, 1, 65_536, 70_000, 5_000, 0, 12]])
def test_constant_columns_of_batches_of_varying_lengths_hold_their_values_and_pickle_small(
    lengths: list[int],
) -> None:
    # Polls vary in length; each batch's constant columns are cut from shared ones.
    for n in lengths:
        b = raw_batch_from_columns(
            topic="orders", partition=7, offsets=range(n), keys=[None] * n, values=[b"v"] * n
        )
        b.validate(full=True)
        assert b.column("_twg_source_topic").to_pylist() == ["orders"] * n
        assert b.column("_twg_source_partition").to_pylist() == [7] * n
        assert b.column("_twg_source_producer_id").null_count == n
        # Its pickle holds its own rows' worth of the constant columns, not the shared ones.
        constants = b.select(["_twg_source_topic", "_twg_source_partition", "_twg_source_cluster"])
        assert len(pickle.dumps(constants)) < 2_000 + 30 * n
