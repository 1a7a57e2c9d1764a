"""ParquetSink on its own: other file systems, replays, multi-partition batches, errors."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from bytewax.dataflow import Dataflow
from bytewax.errors import BytewaxRuntimeError
from bytewax.testing import TestingSource, run_main

from tests.helpers import cause_of, raw_batch, run_into
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import ConfigError, SinkTerminalError
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.records.batches import raw_batch_from_records
from thalweg_bytewax.records.model import Locator, RawRecord


def offsets_of(table: pa.Table) -> list[tuple[str, int, int]]:
    cols = [
        table.column(c).to_pylist()
        for c in ("_twg_source_topic", "_twg_source_partition", "_twg_source_offset")
    ]
    return sorted(zip(*cols, strict=True))


def test_replayed_and_overlapping_batches_are_written_once(tmp_path: Path) -> None:
    lane = tmp_path / "lane"
    run_into([("t:0", raw_batch("t", 0, range(100)))], ParquetSink(lane))
    # A second run replays with different batch boundaries, overlapping and extending.
    run_into(
        [("t:0", raw_batch("t", 0, range(50, 120))), ("t:0", raw_batch("t", 0, range(120, 150)))],
        ParquetSink(lane),
    )
    got = offsets_of(read_lane(lane))
    assert got == [("t", 0, o) for o in range(150)]
    names = sorted(p.name for p in (lane / "t" / "0").iterdir())
    assert names == [
        "00000000000000000000-00000000000000000099.parquet",
        "00000000000000000100-00000000000000000149.parquet",
    ]


def test_a_sparse_lane_replays_exactly(tmp_path: Path) -> None:
    # A DLQ-like lane holds only some offsets; a replay brings them again plus new ones.
    sparse = lambda offs: raw_batch_from_records(  # noqa: E731
        [RawRecord(Locator("t", 0, o, "c"), b"k", b"v%d" % o) for o in offs]
    )
    run_into([("t:0", sparse([10, 50]))], ParquetSink(tmp_path))
    run_into(
        [("t:0", sparse([10])), ("t:0", sparse([50, 70])), ("t:0", sparse([90]))],
        ParquetSink(tmp_path),
    )
    assert offsets_of(read_lane(tmp_path)) == [("t", 0, o) for o in (10, 50, 70, 90)]


def test_interleaved_streams_into_one_sink_fail_loudly(tmp_path: Path) -> None:
    # Two streams merged into one sink interleave offsets; skipping by range would then
    # drop rows, so the sink refuses instead of losing anything.
    with pytest.raises(
        ConfigError, match=r"rows of `t:0` arrived out of offset order \(offset 250 after 400\)"
    ):
        run_into(
            [("t:0", raw_batch("t", 0, range(100, 401, 150))), ("t:0", raw_batch("t", 0, [250]))],
            ParquetSink(tmp_path),
        )
    assert not list(tmp_path.rglob("*.parquet"))


def test_a_batch_spanning_partitions_is_split_per_partition(tmp_path: Path) -> None:
    # One shard owns every partition, so a batch spanning several is accepted; with more
    # shards each partition must reach its own (test_parquet_ownership.py).
    mixed = pa.concat_batches(
        [raw_batch("a", 0, range(3)), raw_batch("b", 1, range(2)), raw_batch("a", 0, range(3, 5))]
    )
    run_into([("mixed:0", mixed)], ParquetSink(tmp_path, shards=1))
    assert offsets_of(read_lane(tmp_path)) == [("a", 0, o) for o in range(5)] + [
        ("b", 1, 0),
        ("b", 1, 1),
    ]
    assert {p.parent.parent.name for p in tmp_path.rglob("*.parquet")} == {"a", "b"}


def test_hidden_and_odd_topic_names_stay_visible(tmp_path: Path) -> None:
    run_into(
        [
            ("__consumer_offsets:0", raw_batch("__consumer_offsets", 0, range(3))),
            ("a/b:0", raw_batch("a/b", 0, range(2))),
        ],
        ParquetSink(tmp_path),
    )
    topics = set(read_lane(tmp_path).column("_twg_source_topic").to_pylist())
    assert topics == {"__consumer_offsets", "a/b"}


def test_any_pyarrow_filesystem_works(tmp_path: Path) -> None:
    import fsspec
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    memory = fsspec.filesystem("memory")
    fs = PyFileSystem(FSSpecHandler(memory))
    run_into([("t:0", raw_batch("t", 0, range(10)))], ParquetSink("/lane", filesystem=fs))
    table = ds.dataset("/lane", filesystem=fs, format="parquet").to_table()
    assert offsets_of(table) == [("t", 0, o) for o in range(10)]
    hidden = [p for p in memory.find("/lane") if "/." in p]
    # The owner marker and the lane's first schema version; no staging left.
    assert hidden == ["/lane/.thalweg-lane", "/lane/.thalweg-schema-00000001.arrow"]


def test_file_uri(tmp_path: Path) -> None:
    run_into([("t:0", raw_batch("t", 0, range(4)))], ParquetSink(f"file://{tmp_path}/lane"))
    assert read_lane(tmp_path / "lane").num_rows == 4


def test_emit_ts_is_stamped(tmp_path: Path) -> None:
    # The time the sink wrote the rows, UTC: inside the run, one stamp for one write.
    before = datetime.now(UTC)
    run_into([("t:0", raw_batch("t", 0, range(3)))], ParquetSink(tmp_path))
    after = datetime.now(UTC)
    table = read_lane(tmp_path)
    assert table.column("_twg_emit_ts").null_count == 0
    assert table.schema.field("_twg_emit_ts").type == pa.timestamp("us", tz="UTC")
    stamps = set(table.column("_twg_emit_ts").to_pylist())
    assert len(stamps) == 1, stamps
    (stamp,) = stamps
    # The stamp is whole microseconds from a float timestamp: it may round down by one.
    assert before - timedelta(microseconds=1) <= stamp <= after


def test_batches_without_locator_columns_are_refused(tmp_path: Path) -> None:
    bad = pa.RecordBatch.from_pydict({"x": [1, 2]})
    with pytest.raises(ConfigError, match="locator columns") as info:
        run_into([("t:0", bad)], ParquetSink(tmp_path))
    assert "locator columns" in str(info.value)
    assert not list(tmp_path.rglob("*.parquet"))


def test_local_filesystem_object(tmp_path: Path) -> None:
    run_into(
        [("t:0", raw_batch("t", 0, range(2)))],
        ParquetSink(str(tmp_path), filesystem=pafs.LocalFileSystem()),
    )
    assert read_lane(tmp_path).num_rows == 2


def test_rows_without_a_locator_are_refused_by_name(tmp_path: Path) -> None:
    batch = raw_batch("t", 0, range(2))
    batch = batch.set_column(
        batch.schema.get_field_index("_twg_source_topic"),
        pa.field("_twg_source_topic", pa.string()),
        pa.array(["t", None], pa.string()),
    )
    with pytest.raises(ConfigError, match="1 rows have no locator"):
        run_into([("t:0", batch)], ParquetSink(tmp_path))
    assert not list(tmp_path.rglob("*.parquet"))


def test_a_recreated_topic_is_refused_not_skipped(tmp_path: Path) -> None:
    # Offsets restart at 0 after a topic is deleted and recreated: skipping them as
    # "already covered" would drop every new record below the old high-water mark.
    run_into([("t:0", raw_batch("t", 0, range(10)))], ParquetSink(tmp_path))
    recreated = raw_batch_from_records(
        [RawRecord(Locator("t", 0, o, "c"), b"k", b"new-%d" % o) for o in range(5)]
    )
    with pytest.raises(SinkTerminalError, match=r"holds a different record at offset 0") as info:
        run_into([("t:0", recreated)], ParquetSink(tmp_path))
    chain = [info.value, info.value.__cause__]
    assert any(isinstance(e, SinkTerminalError) for e in chain), chain
    assert offsets_of(read_lane(tmp_path)) == [("t", 0, o) for o in range(10)]  # untouched


def test_two_steps_cannot_share_a_lane_path(tmp_path: Path) -> None:
    # Two sinks on one path would overwrite each other's <first>-<last> files and take
    # each other's files for their own coverage: the second step is refused up front.
    flow = Dataflow("two_sinks")
    up = op.input("in", flow, TestingSource([("t:0", raw_batch("t", 0, range(3)))]))
    op.output("decode_dlq", up, ParquetSink(tmp_path))
    op.output("contract_dlq", up, ParquetSink(tmp_path))
    with pytest.raises(BytewaxRuntimeError) as info:
        run_main(flow)
    assert re.search(
        r"lane path .* is written by step `two_sinks\.(decode|contract)_dlq`",
        str(cause_of(info.value, ConfigError)),
    )


def test_the_same_step_may_come_back_to_its_lane(tmp_path: Path) -> None:
    run_into([("t:0", raw_batch("t", 0, range(3)))], ParquetSink(tmp_path))
    run_into([("t:0", raw_batch("t", 0, range(3, 6)))], ParquetSink(tmp_path))
    assert (tmp_path / ".thalweg-lane").read_text() == "sink.out\n"
    assert read_lane(tmp_path).num_rows == 6


def test_dictionary_encoding_only_where_values_repeat(tmp_path: Path) -> None:
    # A decoded lane: a repeating status, unique ids, nested repeating and unique leaves.
    base = raw_batch("orders", 0, range(500))
    n = base.num_rows
    payload = pa.table(
        {
            "status": pa.array(["NEW", "PAID"] * (n // 2)),
            "order_id": pa.array([f"id-{i:06d}" for i in range(n)]),
            "lines": pa.array([[{"sku": f"S{i % 3}", "note": f"n{i}"}] for i in range(n)]),
        }
    )
    meta = ["_twg_source_topic", "_twg_source_partition", "_twg_source_offset"]
    batch = pa.RecordBatch.from_arrays(
        [*(c.combine_chunks() for c in payload.columns), *(base.column(m) for m in meta)],
        names=[*payload.column_names, *meta],
    )
    run_into([("orders:0", batch)], ParquetSink(tmp_path / "lane"))
    (path,) = (tmp_path / "lane").rglob("*.parquet")
    group = pq.ParquetFile(path).metadata.row_group(0)
    has_dictionary = {
        group.column(i).path_in_schema: group.column(i).has_dictionary_page
        for i in range(group.num_columns)
    }
    assert has_dictionary["status"] and has_dictionary["lines.list.element.sku"]
    assert not has_dictionary["_twg_source_topic"]  # one value a file: plain, see below
    assert not has_dictionary["order_id"] and not has_dictionary["lines.list.element.note"]
    assert not has_dictionary["_twg_source_offset"]
    assert pq.read_table(path).select(payload.column_names).equals(payload)


@pytest.mark.parametrize(
    ("name", "column"),
    [
        ("dictionary_status", pa.array(["NEW", "PAID"] * 5).dictionary_encode()),
        (
            "nested_dictionary",
            pa.array([{"s": "x"}] * 10).cast(
                pa.struct([("s", pa.dictionary(pa.int32(), pa.string()))])
            ),
        ),
        ("json_extension", pa.array(["{}"] * 10, pa.json_())),
        ("string_view", pa.array(["a"] * 10, pa.string_view())),
    ],
)
def test_columns_without_a_distinct_count_are_written(
    tmp_path: Path, name: str, column: pa.Array
) -> None:
    # The dictionary choice counts distinct values; dictionary-typed, extension and
    # view columns have no such kernel and must not fail the snapshot.
    base = raw_batch("orders", 0, range(10))
    meta = ["_twg_source_topic", "_twg_source_partition", "_twg_source_offset"]
    batch = pa.RecordBatch.from_arrays(
        [column, *(base.column(m) for m in meta)], names=[name, *meta]
    )
    run_into([("orders:0", batch)], ParquetSink(tmp_path / "lane"))
    (path,) = (tmp_path / "lane").rglob("*.parquet")
    assert pq.read_table(path).column(name).to_pylist() == column.to_pylist()


def test_a_tiny_first_file_does_not_decide_dictionary_encoding_for_later_ones(
    tmp_path: Path,
) -> None:
    # One row cannot show repetition; the choice must not stick to the schema.
    meta = ["_twg_source_topic", "_twg_source_partition", "_twg_source_offset"]

    def batch(n: int) -> pa.RecordBatch:
        base = raw_batch("orders", 0, range(n))
        status = pa.array([["NEW", "PAID"][i % 2] for i in range(n)])
        return pa.RecordBatch.from_arrays(
            [status, *(base.column(m) for m in meta)], names=["tiny_first_status", *meta]
        )

    run_into([("orders:0", batch(1))], ParquetSink(tmp_path / "first"))
    run_into([("orders:0", batch(5000))], ParquetSink(tmp_path / "second"))
    (path,) = (tmp_path / "second").rglob("*.parquet")
    group = pq.ParquetFile(path).metadata.row_group(0)
    by_path = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    assert by_path["tiny_first_status"].has_dictionary_page
    assert not by_path["_twg_source_offset"].has_dictionary_page


def test_the_lanes_metadata_columns_are_written_plain_or_as_deltas(tmp_path: Path) -> None:
    # Offsets and source timestamps rise through a file: delta-encoded; the columns of
    # one value per batch or file carry no dictionary; every value reads back as written.
    batch = raw_batch("orders", 0, range(5000))
    run_into([("orders:0", batch)], ParquetSink(tmp_path / "lane"))
    (path,) = (tmp_path / "lane").rglob("*.parquet")
    group = pq.ParquetFile(path).metadata.row_group(0)
    by_path = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    for name in ("_twg_source_offset", "_twg_source_timestamp"):
        assert "DELTA_BINARY_PACKED" in by_path[name].encodings, name
        assert by_path[name].is_stats_set, name  # readers still prune by them
    for name in ("_twg_source_topic", "_twg_source_partition", "_twg_ingest_ts"):
        assert not by_path[name].has_dictionary_page, name
        assert by_path[name].is_stats_set, name
    back = pq.read_table(path)
    for name in ("_twg_source_offset", "_twg_source_timestamp", "_twg_source_topic"):
        assert back.column(name).to_pylist() == batch.column(name).to_pylist(), name


def test_files_below_the_sample_size_reuse_the_dictionary_choice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Many partitions with short epochs write many files of a few thousand rows: each
    # must not sample again (0.23 s of a 300k-record run), yet a file with far more
    # rows than the cached sample must (a tiny first file decides nothing).
    from thalweg_bytewax.connectors.parquet import _encoding as encoding

    samples: list[int] = []
    real = encoding._leaves  # noqa: SLF001 - counting the sampling rounds

    def counting(table: pa.Table) -> Any:
        samples.append(table.num_rows)
        return real(table)

    monkeypatch.setattr(encoding, "_leaves", counting)

    def table(n: int) -> pa.Table:
        return pa.table(
            {"reused_choice_status": pa.array([["NEW", "PAID"][i % 2] for i in range(n)])}
        )

    for n in [3, 3000, *([3500] * 20), 3900]:
        options = encoding.column_options(table(n))
    assert samples == [3, 3000]  # the 1x..2x rule: 3000 >= 2 * 3, then nothing outweighs 3000
    assert options["use_dictionary"] == ["reused_choice_status"]
    encoding.column_options(table(5000))  # a full sample replaces a partial one, once
    encoding.column_options(table(9000))
    assert samples == [3, 3000, 4096]


def test_a_lane_written_before_schema_versions_starts_from_its_files(tmp_path: Path) -> None:
    # A file of a lane from before versions existed, with a column the batches lack.
    old = pa.Table.from_batches([raw_batch("t", 0, range(5))])
    old = old.append_column("note", pa.array(["kept"] * 5))
    (tmp_path / "t" / "0").mkdir(parents=True)
    pq.write_table(old, tmp_path / "t" / "0" / f"{0:020d}-{4:020d}.parquet")
    run_into([("t:0", raw_batch("t", 0, range(5, 10)))], ParquetSink(tmp_path))
    recorded = pa.ipc.read_schema(pa.OSFile(str(tmp_path / ".thalweg-schema-00000001.arrow")))
    assert "note" in recorded.names  # the first version is the join of the files' schemas
    got = read_lane(tmp_path)
    assert offsets_of(got) == [("t", 0, o) for o in range(10)]
    assert got.column("note").to_pylist().count("kept") == 5


def test_a_new_lane_records_its_first_batchs_schema(tmp_path: Path) -> None:
    # Files under hidden parts of the lane (staging, markers) are no data files.
    (tmp_path / ".staging").mkdir()
    pq.write_table(pa.table({"stray": [1]}), tmp_path / ".staging" / "x.parquet")
    run_into([("t:0", raw_batch("t", 0, range(3)))], ParquetSink(tmp_path))
    recorded = pa.ipc.read_schema(pa.OSFile(str(tmp_path / ".thalweg-schema-00000001.arrow")))
    assert "stray" not in recorded.names
    assert offsets_of(read_lane(tmp_path)) == [("t", 0, o) for o in range(3)]
