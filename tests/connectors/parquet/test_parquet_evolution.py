"""A Parquet lane whose batches drift: it evolves or refuses, and always reads back whole.

Partitions are driven as Bytewax would (``write_batch`` during an epoch, ``snapshot`` at
its close, a new partition on restart); the kill-and-resume case runs a real flow under
``python -m bytewax.run`` and SIGKILLs it around the schema change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.connectors.parquet import parquet_drift_flow as drift
from tests.fixtures.crash import CrashHarness
from tests.sinks.targets import C, orders
from thalweg_bytewax.catalog import SchemaEvolutionError
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import SchemaError, SinkTerminalError
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.lanes._schema import join_types
from thalweg_bytewax.runtime.parts import route


def part(sink: ParquetSink, shard: int = 0, resume: Any = None) -> Any:
    return sink.build_part("flow.lane", f"shard-{shard:03d}", resume)


def finalized(lane: Path) -> list[str]:
    return sorted(
        str(p.relative_to(lane)) for p in lane.rglob("*.parquet") if not p.name.startswith(".")
    )


def versions(lane: Path) -> list[str]:
    return sorted(p.name for p in lane.glob(".thalweg-schema-*"))


def test_a_new_field_mid_stream_reads_back_null_for_older_rows(tmp_path: Path) -> None:
    lane = tmp_path / "lane"
    p = part(ParquetSink(lane, shards=1))
    p.write_batch([orders(0, [0, 1]), orders(1, [0])])
    p.snapshot()
    later = orders(0, [2, 3], extra={"coupon": pa.array(["A", None])})
    p.write_batch([later])
    p.snapshot()
    # Partition 1 still sends the old schema: it lands as it is, read NULL for coupon.
    p.write_batch([orders(1, [1])])
    p.snapshot()
    p.close()
    got = read_lane(lane).sort_by([(C.source_partition, "ascending"), (C.source_offset, "ascending")])
    assert got.column("coupon").to_pylist() == [None, None, "A", None, None, None]
    assert got.schema.field("coupon").nullable
    assert versions(lane) == [".thalweg-schema-00000001.arrow", ".thalweg-schema-00000002.arrow"]
    # Only the epoch that carried it added the column: earlier files stay as written.
    first = pq.read_schema(lane / "orders" / "0" / finalized(lane)[0].rpartition("/")[2])
    assert "coupon" not in first.names


def test_a_type_change_is_refused_naming_the_column_and_nothing_of_the_epoch_lands(
    tmp_path: Path,
) -> None:
    lane = tmp_path / "lane"
    p = part(ParquetSink(lane, shards=1))
    p.write_batch([orders(0, [0, 1])])
    p.snapshot()
    held, recorded = finalized(lane), versions(lane)
    # A fitting batch of the same epoch is staged first; the epoch fails as a whole.
    p.write_batch([orders(1, [0, 1])])
    with pytest.raises(SchemaEvolutionError) as refused:
        p.write_batch([orders(0, [2], extra={"qty": pa.array(["x"])})])
    text = str(refused.value)
    assert text.startswith(f"parquet sink `{lane}`: column `qty` is `int32`"), text
    assert "got `string`" in text and "cast the column upstream" in text
    assert p.failed
    with pytest.raises(SinkTerminalError):
        p.snapshot()
    p.close()
    assert finalized(lane) == held and versions(lane) == recorded
    assert read_lane(lane).schema.field("qty").type == pa.int32()
    # Another partition of the lane, even in a fresh run, is refused the same way.
    q = part(ParquetSink(lane, shards=1))
    with pytest.raises(SchemaEvolutionError, match=r"column `qty` is `int32`.*got `string`"):
        q.write_batch([orders(3, [0], extra={"qty": pa.array(["y"])})])
    q.close()
    assert finalized(lane) == held


def test_a_missing_non_nullable_column_is_refused(tmp_path: Path) -> None:
    lane = tmp_path / "lane"
    strict = pa.field("sku", pa.string(), nullable=False)
    first = orders(0, [0])
    first = first.append_column(strict, pa.array(["a"]))
    p = part(ParquetSink(lane, shards=1))
    p.write_batch([first])
    p.snapshot()
    with pytest.raises(SchemaEvolutionError, match=r"column `sku` is not nullable .* absent"):
        p.write_batch([orders(0, [1])])


def test_widening_needs_the_opt_in_and_then_reads_back_exact(tmp_path: Path) -> None:
    lane = tmp_path / "lane"
    p = part(ParquetSink(lane, shards=1))
    p.write_batch([orders(0, [0, 1])])
    p.snapshot()
    p.close()
    big = pa.array([2**40, -(2**40)], pa.int64())
    q = part(ParquetSink(lane, shards=1))
    with pytest.raises(SchemaEvolutionError, match=r"`qty` is `int32`.*got `int64`.*allow_widening"):
        q.write_batch([orders(0, [2, 3], extra={"qty": big})])
    q.close()
    r = part(ParquetSink(lane, shards=1, allow_widening=True))
    r.write_batch([orders(0, [2, 3], extra={"qty": big})])
    r.snapshot()
    # Later int32 batches fit the widened column and are cast to it.
    r.write_batch([orders(0, [4])])
    r.snapshot()
    r.close()
    got = read_lane(lane).sort_by(C.source_offset)
    assert got.schema.field("qty").type == pa.int64()
    assert got.column("qty").to_pylist() == [0, 1, 2**40, -(2**40), 4]
    assert len(versions(lane)) == 2  # noqa: PLR2004 - the first, then the widening


def test_a_narrower_batch_fits_without_a_new_version(tmp_path: Path) -> None:
    lane = tmp_path / "lane"
    p = part(ParquetSink(lane, shards=1))
    p.write_batch([orders(0, [0], extra={"qty": pa.array([2**40], pa.int64())})])
    p.snapshot()
    p.write_batch([orders(0, [1])])  # qty int32 fits int64
    p.snapshot()
    p.close()
    assert len(versions(lane)) == 1
    assert {pq.read_schema(lane / f).field("qty").type for f in finalized(lane)} == {pa.int64()}
    assert read_lane(lane).sort_by(C.source_offset).column("qty").to_pylist() == [2**40, 1]


def test_concurrent_writers_of_one_lane_see_each_others_versions(tmp_path: Path) -> None:
    lane = tmp_path / "lane"
    seed = part(ParquetSink(lane, shards=1))
    seed.write_batch([orders(0, [0]), orders(1, [0])])
    seed.snapshot()
    seed.close()
    # Two processes (two sinks on one path, each owning its partitions) change it at once.
    a = part(ParquetSink(lane, shards=2), shard=0)
    b = part(ParquetSink(lane, shards=2), shard=1)
    mine_a = next(p for p in range(8) if route(f"orders:{p}", 2) == 0)
    mine_b = next(p for p in range(8) if route(f"orders:{p}", 2) == 1)
    a.write_batch([orders(mine_a, [1], extra={"x": pa.array([1], pa.int64())})])
    b.write_batch([orders(mine_b, [1], extra={"x": pa.array(["1"])})])
    a.snapshot()
    with pytest.raises(SchemaEvolutionError, match=r"another writer .* column `x` is `int64`"):
        b.snapshot()
    a.close()
    b.close()
    got = read_lane(lane)
    assert got.schema.field("x").type == pa.int64()
    assert sorted(got.column("x").to_pylist(), key=str) == [1, None, None]


def test_a_lane_written_before_versions_gets_its_first_from_its_files(tmp_path: Path) -> None:
    lane = tmp_path / "lane"
    (lane / "orders" / "0").mkdir(parents=True)
    old = pa.Table.from_batches([orders(0, [0, 1])])
    pq.write_table(old, lane / "orders" / "0" / f"{0:020d}-{1:020d}.parquet")
    p = part(ParquetSink(lane, shards=1))
    with pytest.raises(SchemaEvolutionError, match=r"column `qty` is `int32`.*got `string`"):
        p.write_batch([orders(0, [2], extra={"qty": pa.array(["x"])})])
    q = part(ParquetSink(lane, shards=1))
    q.write_batch([orders(0, [2])])
    q.snapshot()
    q.close()
    assert versions(lane) == [".thalweg-schema-00000001.arrow"]
    assert read_lane(lane).num_rows == 3  # noqa: PLR2004


def write_file(lane: Path, name: str, table: pa.Table) -> None:
    (lane / "t" / "0").mkdir(parents=True, exist_ok=True)
    pq.write_table(table, lane / "t" / "0" / name)


def test_read_lane_joins_files_of_several_schemas_exactly(tmp_path: Path) -> None:
    write_file(tmp_path, "a.parquet", pa.table({"id": pa.array([1], pa.int32()), "v": [1.5]}))
    write_file(
        tmp_path,
        "b.parquet",
        pa.table({"id": pa.array([2**62], pa.int64()), "v": [2.5], "new": ["n"]}),
    )
    write_file(tmp_path, "c.parquet", pa.table({"id": pa.array([3], pa.int16()), "v": [None]}))
    got = read_lane(tmp_path)
    assert got.schema.field("id").type == pa.int64()
    assert got.to_pydict() == {
        "id": [1, 2**62, 3],
        "v": [1.5, 2.5, None],
        "new": [None, "n", None],
    }
    assert read_lane(tmp_path, ["new"]).column("new").to_pylist() == [None, "n", None]


def test_read_lane_names_the_files_and_column_of_an_unreadable_lane(tmp_path: Path) -> None:
    write_file(tmp_path, "a.parquet", pa.table({"qty": pa.array([1], pa.int32())}))
    write_file(tmp_path, "b.parquet", pa.table({"qty": ["1"]}))
    with pytest.raises(SchemaError) as info:
        read_lane(tmp_path)
    text = str(info.value)
    assert "column `qty` is `int32`" in text and "`string`" in text
    assert "a.parquet" in text and "b.parquet" in text
    # Lossy by value (int64 and double): never joined silently into a float column.
    write_file(tmp_path / "x", "a.parquet", pa.table({"n": pa.array([2**60 + 1], pa.int64())}))
    write_file(tmp_path / "x", "b.parquet", pa.table({"n": [0.5]}))
    with pytest.raises(SchemaError, match=r"column `n` is `int64`"):
        read_lane(tmp_path / "x")


_SCALARS = [
    pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
    pa.uint64(), pa.float32(), pa.float64(), pa.decimal128(5, 2), pa.decimal128(12, 2),
    pa.decimal128(20, 0), pa.string(), pa.large_string(),
]  # fmt: skip


def extremes(t: pa.DataType) -> pa.Array:
    """Values at the edges of ``t``'s range (and a NULL)."""
    if pa.types.is_integer(t):
        info = {8: 2**7, 16: 2**15, 32: 2**31, 64: 2**63}[t.bit_width]
        low, high = (-info, info - 1) if pa.types.is_signed_integer(t) else (0, 2 * info - 1)
        return pa.array([low, high, 0, None], t)
    if pa.types.is_floating(t):
        return pa.array([1.0 / 3, -1e30 if t == pa.float32() else -1e300, None], t)
    if pa.types.is_decimal(t):
        top = "9" * (t.precision - t.scale)
        return pa.array([f"{top}.{'9' * t.scale}" if t.scale else top, "-1", None]).cast(t)
    return pa.array(["é", "", None], t)


@given(st.sampled_from(_SCALARS), st.sampled_from(_SCALARS))
def test_a_joined_type_holds_both_sides_exactly(old: pa.DataType, new: pa.DataType) -> None:
    joined = join_types(old, new)
    if joined is None:
        return
    target = joined[0]
    for values in (extremes(old), extremes(new)):
        cast = values.cast(target)
        assert cast.cast(values.type).equals(values), (old, new, target)


@pytest.mark.slow
def test_kill_and_resume_across_a_schema_change(crash: CrashHarness) -> None:
    lane = crash.root / "lane"
    flow = crash.flow(f"tests.connectors.parquet.parquet_drift_flow:build_flow({str(crash.root)!r})")
    # The new schema's version recorded, no file of its epoch final; its rows staged
    # again on resume; committed, the snapshot not yet in the recovery store.
    faults = ("parquet.schema_recorded:2", "epoch_sink.mid_write:2", "epoch_sink.after_commit:2")
    for fault in faults:
        flow.killed_at(fault)
        ids = read_lane(lane).column(C.record_id).to_pylist()
        assert len(ids) == len(set(ids)), fault
        if fault.startswith("parquet.schema_recorded"):
            assert len(versions(lane)) == 2 and "coupon" not in read_lane(lane).column_names  # noqa: PLR2004
    flow.finishes()
    got = read_lane(lane).sort_by([(C.source_partition, "ascending"), (C.source_offset, "ascending")])
    want = pa.Table.from_batches(
        [
            batch.select(["qty", C.record_id])
            .cast(pa.schema([("qty", pa.int64()), (C.record_id, pa.binary(16))]))
            for p in range(drift.PARTITIONS)
            for batch in (drift.drifted(p, o) for o in range(0, drift.TOTAL, drift.BATCH))
        ]
    )
    assert got.column(C.record_id).to_pylist() == want.column(C.record_id).to_pylist()
    assert got.column("qty").to_pylist() == want.column("qty").to_pylist()
    coupons = got.column("coupon").to_pylist()
    offsets = got.column(C.source_offset).to_pylist()
    assert coupons == [None if o < drift.CHANGE else f"c{o}" for o in offsets]
