"""IcebergSink's write-behind encoder: row groups encoded while an epoch's batches arrive.

An unpartitioned append table's rows go to a worker thread a row group at a time; the
epoch's data file is committed at its snapshot, never before, and an encode that
failed fails the partition loudly, at the snapshot at the latest, publishing nothing.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.connectors.iceberg.test_iceberg_sink import orders, part, rows_of, snapshots
from tests.fixtures.iceberg import IcebergSinkFactory
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig
from thalweg_bytewax.errors import SinkTerminalError

BLOB = 16 * 1024  # bytes of the `blob` column per row: batches of 64 rows are 1 MiB


def wide(start: int, n: int = 64) -> pa.RecordBatch:
    """Rows of source partition 0 at offsets ``start…start+n-1`` with a 16 KiB blob each."""
    blob = pa.array([bytes([start % 251]) * BLOB] * n, pa.binary())
    return orders(0, list(range(start, start + n)), extra={"blob": blob})


def row_groups(config: IcebergCatalogConfig) -> list[int]:
    """The row groups of each data file of the table's current snapshot, in order."""
    table = config.load().load_table("test.orders")
    counts = []
    for task in table.scan().plan_files():
        path = task.file.file_path.removeprefix("file://")
        counts.append(pq.ParquetFile(path).metadata.num_row_groups)
    return counts


def test_an_epoch_is_encoded_as_row_groups_of_one_file_while_its_batches_arrive(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    _, p = part(iceberg_sink_factory, row_group_bytes=2 * 1024 * 1024)
    for b in range(8):  # 8 MiB: four row groups handed over during the epoch
        p.write_batch([wide(b * 64)])
    assert rows_of(iceberg_catalog_config) == []  # encoded, not committed
    p.snapshot()
    assert len(snapshots(iceberg_catalog_config)) == 1
    assert row_groups(iceberg_catalog_config) == [4]
    assert p.stats.data_files_written == 1
    assert rows_of(iceberg_catalog_config) == [(0, o) for o in range(512)]


def test_by_default_an_epoch_after_the_first_is_two_row_groups(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    # The first epoch is encoded at its snapshot (nothing known of its size); the next
    # one hands its first three quarters to the worker while the rest arrives.
    _, p = part(iceberg_sink_factory)
    for epoch in range(2):
        for b in range(8):  # 8 MiB an epoch
            p.write_batch([wide((epoch * 8 + b) * 64)])
        p.snapshot()
    table = iceberg_catalog_config.load().load_table("test.orders")
    per_file = {}
    for task in table.scan().plan_files():
        path = task.file.file_path.removeprefix("file://")
        first = pq.ParquetFile(path).read(columns=["_twg_source_offset"]).column(0)[0]
        per_file[first.as_py()] = pq.ParquetFile(path).metadata.num_row_groups
    assert per_file == {0: 1, 512: 2}
    assert rows_of(iceberg_catalog_config) == [(0, o) for o in range(1024)]


def test_a_schema_change_mid_epoch_starts_a_new_file_of_the_new_columns(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    _, p = part(iceberg_sink_factory, row_group_bytes=1)
    p.write_batch([orders(0, [0, 1])])
    p.write_batch([orders(0, [2, 3], extra={"note": pa.array(["a", "b"])})])
    p.snapshot()
    assert p.stats.data_files_written == 2
    notes = pa.Table.from_batches(
        iceberg_catalog_config.load().load_table("test.orders").scan().to_arrow().to_batches()
    )
    offsets, notes_ = notes.column("_twg_source_offset"), notes.column("note")
    by_offset = dict(zip(offsets.to_pylist(), notes_.to_pylist(), strict=True))
    assert by_offset == {0: None, 1: None, 2: "a", 3: "b"}


def test_a_failed_encode_fails_the_snapshot_loudly_and_publishes_nothing(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    _, p = part(iceberg_sink_factory, row_group_bytes=1)
    p.write_batch([orders(0, [0, 1])])
    p.snapshot()
    # The data directory becomes a file: the next data file cannot be created (as root
    # too), on the worker thread, while the flow's thread goes on.
    location = iceberg_catalog_config.load().load_table("test.orders").location()
    data = Path(location.removeprefix("file://")) / "data"
    assert data.is_dir()
    data.rename(data.with_name("data.moved"))
    data.write_bytes(b"")
    with pytest.raises(SinkTerminalError, match=r"table `test\.orders`.*data file") as raised:
        p.write_batch([orders(0, [2, 3])])
        p.snapshot()
    assert isinstance(raised.value.__cause__, OSError)
    assert p.failed
    assert len(snapshots(iceberg_catalog_config)) == 1  # the first epoch's only
    data.unlink()
    data.with_name("data.moved").rename(data)
    assert rows_of(iceberg_catalog_config) == [(0, 0), (0, 1)]
    with pytest.raises(SinkTerminalError, match="failed write or commit"):
        p.snapshot()
    p.close()  # stops the worker thread; never raises


def test_a_column_of_distinct_values_is_written_without_a_dictionary_and_reads_back_exact(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    # Dictionary-encoding ids, offsets and record ids only hashes them (again in each
    # row group); the low-cardinality columns, nested ones too, keep their dictionary.
    n = 40_000  # an epoch's first row group holds more than the sampled rows

    def batch(epoch: int) -> pa.RecordBatch:
        offsets = list(range(epoch * n, (epoch + 1) * n))
        region = pa.array([{"code": f"r{o % 3}"} for o in offsets])
        return orders(0, offsets, extra={"region": region})

    _, p = part(iceberg_sink_factory)
    written = []
    for epoch in range(2):
        written.append(batch(epoch))
        p.write_batch([written[-1]])
        p.snapshot()
    table = iceberg_catalog_config.load().load_table("test.orders")
    files = sorted(
        task.file.file_path.removeprefix("file://") for task in table.scan().plan_files()
    )
    assert len(files) == 2
    for path in files:
        chunks = pq.ParquetFile(path).metadata.row_group(0)
        dictionary = {
            chunks.column(i).path_in_schema: chunks.column(i).has_dictionary_page
            for i in range(chunks.num_columns)
        }
        assert dictionary == {
            "order_id": False,
            "customer": True,
            "qty": True,
            "_twg_source_topic": True,
            "_twg_source_partition": True,
            "_twg_source_offset": False,
            "_twg_record_id": False,
            "region.code": True,
            "_twg_emit_ts": True,  # one value per batch
        }
    expected = pa.Table.from_batches(written).sort_by("_twg_source_offset")
    scanned = table.scan().to_arrow().sort_by("_twg_source_offset")
    assert scanned.select(expected.column_names).cast(expected.schema).equals(expected)
    listed = ", ".join(f"'{path}'" for path in files)
    query = f"select * from read_parquet([{listed}]) order by _twg_source_offset"
    relation = duckdb.connect().sql(query)
    assert relation is not None
    read = relation.to_arrow_table()
    assert read.select(expected.column_names).cast(expected.schema).equals(expected)
    # The file statistics hold for the plain columns as for the others.
    order_id = table.schema().find_field("order_id").field_id
    for task in table.scan().plan_files():
        file = task.file
        assert file.record_count == n
        assert set(file.value_counts.values()) == {n}
        assert set(file.null_value_counts.values()) == {0}
        first = int.from_bytes(file.lower_bounds[order_id], "little", signed=True)
        last = int.from_bytes(file.upper_bounds[order_id], "little", signed=True)
        assert (first, last) in {(0, n - 1), (n, 2 * n - 1)}
