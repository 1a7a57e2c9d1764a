"""KafkaSink's locator: one packed ``_twg.locator`` header per record, built per column.

Properties over the real ``prepare`` (sliced batches, null record ids, source headers
with null lists) and round trips through librdkafka's mock cluster: the header a
consumer reads parses back to the row's source topic, partition, offset and record id,
and the read-back on resume reconciles from it, with or without record ids.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from tests.connectors.kafka.kafka_sink_helpers import read_topic
from thalweg_bytewax.connectors.kafka import KafkaSink
from thalweg_bytewax.connectors.kafka._sink_records import prepare
from thalweg_bytewax.connectors.kafka.sink import HEADER_LOCATOR, Locator, parse_locator
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, metadata_columns

COLUMNS = metadata_columns(DEFAULT_PREFIX, "test")
HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

topics = st.text(st.characters(codec="utf-8", exclude_characters=":"), min_size=1, max_size=40)
rows = st.lists(
    st.tuples(
        st.integers(0, 2**63 - 1),  # offset
        st.one_of(st.none(), st.binary(min_size=16, max_size=16)),  # record id
        st.one_of(  # the raw record's headers
            st.none(),
            st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5)))),
        ),
    ),
    min_size=1,
    max_size=40,
)


def batch_of(topic: str, partition: int, data: list[Any], *, with_ids: bool) -> pa.RecordBatch:
    n = len(data)
    cols: dict[str, pa.Array] = {
        "_twg_source_topic": pa.array([topic] * n, pa.string()),
        "_twg_source_partition": pa.array([partition] * n, pa.int32()),
        "_twg_source_offset": pa.array([d[0] for d in data], pa.int64()),
        "_twg_source_value": pa.array([b"v%d" % i for i in range(n)], pa.binary()),
        "_twg_source_headers": pa.array(
            [None if d[2] is None else [{"key": k, "value": v} for k, v in d[2]] for d in data],
            HEADER_TYPE,
        ),
    }
    if with_ids:
        cols["_twg_record_id"] = pa.array([d[1] for d in data], pa.binary(16))
    return pa.RecordBatch.from_pydict(cols)


def prepared(batch: pa.RecordBatch, *, keep_source_headers: bool) -> Any:
    return prepare(
        batch,
        topic="out",
        component="kafka sink `out`",
        columns=COLUMNS,
        encoder=None,
        key=None,
        headers={},
        keep_source_headers=keep_source_headers,
        by_source_partition=False,
    )


@given(
    topic=topics,
    partition=st.integers(0, 2**31 - 1),
    data=rows,
    with_ids=st.booleans(),
    cut=st.integers(0, 5),
)
def test_every_row_locator_parses_back_to_its_row_even_in_a_sliced_batch(
    topic: str, partition: int, data: list[Any], with_ids: bool, cut: int
) -> None:
    whole = batch_of(topic, partition, data, with_ids=with_ids)
    cut = min(cut, len(data) - 1)
    batch = whole.slice(cut)  # non-zero array offsets: the record id buffer is shared
    got = prepared(batch, keep_source_headers=False)
    assert got.tails is None  # only the locator: the produce loop reuses one header list
    assert [parse_locator(v) for v in got.locators] == [
        Locator(topic, partition, off, rid if with_ids else None) for off, rid, _ in data[cut:]
    ]


@given(data=rows, cut=st.integers(0, 5))
def test_source_headers_follow_the_locator_in_order_with_nulls_kept(
    data: list[Any], cut: int
) -> None:
    cut = min(cut, len(data) - 1)
    batch = batch_of("src", 0, data, with_ids=True).slice(cut)
    got = prepared(batch, keep_source_headers=True)
    assert got.tails == [list(d[2] or ()) for d in data[cut:]]


def test_the_locator_layout_is_fixed_and_anything_else_is_no_locator() -> None:
    rid = bytes(range(16))
    value = struct.pack(">Biq", 1, 7, 2**40) + rid + "tópico".encode()
    assert parse_locator(value) == Locator("tópico", 7, 2**40, rid)
    no_id = struct.pack(">Biq", 0, 7, 5) + bytes(16) + b"t"
    assert parse_locator(no_id) == Locator("t", 7, 5, None)
    assert parse_locator(None) is None
    assert parse_locator(b"12") is None  # e.g. an ASCII offset header of another writer


def test_each_record_carries_one_sink_header_first_and_a_replay_without_ids_is_skipped(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    out = make_topic()
    data = [(o, None, [("h", b"x")]) for o in range(6)]
    sink = KafkaSink([kafka_bootstrap], out, shards=1)
    part = sink.build_part("flow.out", "shard-000", None)
    part.write_batch([batch_of("src", 2, data[:4], with_ids=False)])
    part.snapshot()
    part.close()
    again = sink.build_part("flow.out", "shard-000", None)  # no state: reads it all back
    again.write_batch([batch_of("src", 2, data, with_ids=False)])
    again.snapshot()
    again.close()
    assert again.stats.rows_skipped_replay == 4
    got = sorted(read_topic(kafka_bootstrap, out), key=lambda r: r.locator)
    for i, r in enumerate(got):
        assert [k for k, _ in r.headers] == [HEADER_LOCATOR, "h"]
        assert parse_locator(r.headers[0][1]) == Locator("src", 2, i, None)
    assert len(got) == 6
