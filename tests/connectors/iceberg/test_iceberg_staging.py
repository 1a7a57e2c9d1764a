"""What an Iceberg sink partition stages in an epoch: many small batches held as few.

A flow in tail mode hands the sink a few rows at a time; the stage copies every run of
small batches of one schema into one, keeping the rows, their order (the last row of a
key stays the last) and the byte accounting that decides when data files are written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.connectors.iceberg.test_iceberg_sink import orders, part, rows_of
from tests.fixtures.iceberg import IcebergSinkFactory, read_iceberg
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig
from thalweg_bytewax.connectors.iceberg._staging import (
    COALESCE_BATCHES,
    COALESCE_MAX_BYTES,
    EpochStage,
    last_per_key,
)
from thalweg_bytewax.runtime.buffered_size import buffered_size


def small(start: int, n: int = 3, **kw: object) -> pa.RecordBatch:
    """``n`` rows of source partition 0 from offset ``start``."""
    return orders(0, list(range(start, start + n)), **kw)  # type: ignore[arg-type]


def staged_rows(stage: EpochStage) -> pa.Table:
    return pa.concat_tables(
        [pa.Table.from_batches([b]) for b in stage.batches], promote_options="default"
    )


def test_small_batches_are_held_as_one_batch_per_run_with_their_rows_in_order() -> None:
    stage = EpochStage()
    given = [small(i * 3) for i in range(3 * COALESCE_BATCHES + 5)]
    for b in given:
        stage.add(b)
    assert len(stage.batches) == 3 + 5  # three runs copied into one each, 5 not yet
    assert staged_rows(stage).equals(pa.Table.from_batches(given))


def test_a_run_of_two_schemas_is_coalesced_per_schema_in_order() -> None:
    stage = EpochStage()
    note = {"note": pa.array(["a", "b", "c"])}
    given = [small(i * 3) for i in range(40)]
    given += [small(120 + i * 3, extra=note) for i in range(COALESCE_BATCHES - 40)]
    for b in given:
        stage.add(b)
    assert [b.num_rows for b in stage.batches] == [120, (COALESCE_BATCHES - 40) * 3]
    assert [b.schema.names[-1] for b in stage.batches] == ["_twg_record_id", "note"]
    expected = pa.concat_tables(
        [pa.Table.from_batches([b]) for b in given], promote_options="default"
    )
    assert staged_rows(stage).equals(expected)


def test_large_batches_and_slices_of_them_are_left_as_given() -> None:
    blob = bytes(COALESCE_MAX_BYTES // COALESCE_BATCHES // 3 + 1)
    wide = [small(i * 3, extra={"blob": pa.array([blob] * 3, pa.binary())}) for i in range(64)]
    big = small(0, 200_000)
    slices = [big.slice(i * 3, 3) for i in range(COALESCE_BATCHES)]
    for batches in (wide, slices):
        stage = EpochStage()
        for b in batches:
            stage.add(b)
        assert len(stage.batches) == len(batches)
        assert all(s is g for s, g in zip(stage.batches, batches, strict=True))


def test_the_byte_bound_reaches_a_target_exactly_when_the_rows_do() -> None:
    # Slices of one batch: counted by their shared buffers until measured.
    big = small(0, 1_000, extra={"note": pa.array(["x" * 40] * 1_000)})
    assert big.get_total_buffer_size() * COALESCE_BATCHES <= COALESCE_MAX_BYTES
    stage = EpochStage()
    parts = [big.slice(i * 5, 5) for i in range(2 * COALESCE_BATCHES + 7)]
    for b in parts:
        stage.add(b)
    exact = sum(buffered_size(b) for b in stage.batches)
    assert not stage.full(exact + 1)
    assert stage.nbytes == exact
    assert stage.full(exact)
    measured = list(stage.batches)
    for b in parts[:COALESCE_BATCHES]:  # the measured batches are never merged again
        stage.add(b)
    assert len(stage.batches) == len(measured) + 1
    assert all(s is m for s, m in zip(stage.batches, measured, strict=False))
    assert stage.full(exact + sum(buffered_size(b) for b in parts[:COALESCE_BATCHES]))
    taken = stage.take_batches()
    again = pa.Table.from_batches([*parts, *parts[:COALESCE_BATCHES]])
    assert pa.Table.from_batches(taken).equals(again)
    assert stage.batches == [] and stage.nbytes == 0


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=3 * COALESCE_BATCHES + 3),
    keys=st.integers(1, 9),
)
def test_the_last_row_per_key_survives_coalescing(sizes: list[int], keys: int) -> None:
    batches, offset = [], 0
    for n in sizes:
        offs = list(range(offset, offset + n))
        b = orders(0, offs)
        batches.append(b.set_column(1, "customer", pa.array([f"c{o % keys}" for o in offs])))
        offset += n
    stage = EpochStage()
    for b in batches:
        stage.add(b)
    got = last_per_key(stage.batches, ["customer"])
    want = last_per_key(batches, ["customer"])
    assert got.equals(want)
    last = {f"c{o % keys}": o for o in range(offset)}
    assert (
        dict(zip(got["customer"].to_pylist(), got["_twg_source_offset"].to_pylist(), strict=True))
        == last
    )


def test_an_epoch_of_many_small_batches_commits_every_row_once(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    _, p = part(iceberg_sink_factory)
    n = 5 * COALESCE_BATCHES + 3
    for i in range(n):
        p.write_batch([orders(0, [2 * i, 2 * i + 1]), orders(1, [i])])
    p.snapshot()
    expected = [(0, o) for o in range(2 * n)] + [(1, o) for o in range(n)]
    assert rows_of(iceberg_catalog_config) == expected
    assert p.stats.data_files_written == 1


def test_an_upsert_epoch_of_small_batches_with_a_schema_change_keeps_the_last_row_per_key(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    _, p = part(iceberg_sink_factory, mode="upsert", key_columns=["customer"])
    n = 2 * COALESCE_BATCHES + 10
    for i in range(n):
        extra = {"note": pa.array([f"n{i}"] * 2)} if i >= COALESCE_BATCHES + 20 else None
        p.write_batch([orders(0, [2 * i, 2 * i + 1], extra=extra)])
    p.snapshot()
    got = read_iceberg(iceberg_catalog_config)
    by_customer = dict(
        zip(got["customer"].to_pylist(), got["_twg_source_offset"].to_pylist(), strict=True)
    )
    last = {f"v-c{o % 7}": o for o in range(2 * n)}
    assert by_customer == last
    notes = dict(zip(got["customer"].to_pylist(), got["note"].to_pylist(), strict=True))
    assert notes == {c: f"n{o // 2}" for c, o in last.items()}


@pytest.mark.slow  # starts benchmarks/epoch_stage.py: two child processes, ~4 s
def test_the_stage_benchmark_shows_coalesced_small_results_hold_far_less_malloc() -> None:
    # DuckDB's Arrow result of a small batch holds malloc'd memory far beyond its rows;
    # staged as given, an epoch in tail mode holds hundreds of them until its commit.
    root = Path(__file__).resolve().parents[3]
    cmd = [sys.executable, str(root / "benchmarks" / "epoch_stage.py"), "--pairs", "1"]
    out = subprocess.run(
        [*cmd, "--epochs", "2", "--batches", "200", "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    sides = {row["side"]: row for row in map(json.loads, out.splitlines())}
    assert sides["as given"]["rows"] == sides["coalesced"]["rows"] == 2 * 200 * 20
    assert sides["coalesced"]["held_mb"] * 3 < sides["as given"]["held_mb"]
