"""What an Iceberg sink's epoch commit costs besides its rows: metadata copies, lost races.

An epoch's commit is one snapshot; what it costs must not grow with the work pyiceberg
repeats around it: the table's metadata (which grows with every snapshot kept) deep-copied
once per read of the staged metadata, and a shard committing from a copy of the table that
another shard of the same process had already moved, so that the catalog turned its
commit away and it was redone.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pyiceberg.expressions import visitors
from pyiceberg.table.metadata import TableMetadataV2

from tests.connectors.iceberg.test_iceberg_sink import orders, part, rows_of, snapshots
from tests.fixtures.iceberg import IcebergSinkFactory, read_iceberg
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig

# The warning pyiceberg logs when the catalog turned a commit away and it is redone.
_LOST_RACE = "Commit failed due to a concurrent update"


def test_an_epoch_commit_copies_the_table_metadata_a_few_times(
    iceberg_sink_factory: IcebergSinkFactory,
    iceberg_catalog_config: IcebergCatalogConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, p = part(iceberg_sink_factory)
    for epoch in range(3):  # a table with a few snapshots
        p.write_batch([orders(0, list(range(epoch * 10, epoch * 10 + 10)))])
        p.snapshot()
    copies = 0
    deepcopy = TableMetadataV2.__deepcopy__

    def counted(self: TableMetadataV2, memo: dict[int, Any] | None = None) -> TableMetadataV2:
        nonlocal copies
        copies += 1
        return deepcopy(self, memo)

    monkeypatch.setattr(TableMetadataV2, "__deepcopy__", counted)
    p.write_batch([orders(0, list(range(30, 40)))])
    p.snapshot()
    monkeypatch.undo()
    # pyiceberg's transaction deep-copies the metadata on each of ~20 reads of its
    # staged state during a commit; the sink's derives it once per staged change,
    # sharing what the change left alone.
    # The one left is the SQL catalog's own, as it applies the committed updates.
    assert copies == 1
    assert len(snapshots(iceberg_catalog_config)) == 4
    assert rows_of(iceberg_catalog_config) == [(0, o) for o in range(40)]


def test_shards_of_one_table_in_a_process_commit_without_losing_a_race(
    iceberg_sink_factory: IcebergSinkFactory,
    iceberg_catalog_config: IcebergCatalogConfig,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = iceberg_sink_factory(shards=3)
    shards = [sink.build_part("flow.iceberg", f"shard-00{s}", None) for s in range(3)]
    # A source partition for each shard (the one its key routes to).
    owned = {sink.part_fn(f"orders:{p}"): p for p in reversed(range(12))}
    assert sorted(owned) == [0, 1, 2]
    caplog.set_level(logging.INFO)
    for epoch in range(3):
        for s, shard in enumerate(shards):
            shard.write_batch([orders(owned[s], list(range(epoch * 5, epoch * 5 + 5)))])
        for shard in shards:  # one after another, as a worker snapshots its partitions
            shard.snapshot()
    # Each shard commits its epoch once, from the table the previous shard committed:
    # the catalog turned none away, so none was redone.
    assert [r.getMessage() for r in caplog.records if _LOST_RACE in r.getMessage()] == []
    assert len(snapshots(iceberg_catalog_config)) == 9
    assert sum(shard.stats.commits for shard in shards) == 9
    assert sum(shard.stats.commit_retries for shard in shards) == 0
    expected = [(p, o) for p in sorted(owned.values()) for o in range(15)]
    assert rows_of(iceberg_catalog_config) == expected


def test_processes_committing_to_one_table_take_turns_instead_of_losing_races(
    iceberg_sink_factory: IcebergSinkFactory,
    iceberg_catalog_config: IcebergCatalogConfig,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Two sinks of one table stand for two processes of a cluster (each builds its own
    # sink): each commits its shard's epoch after the other has moved the table.
    sinks = [iceberg_sink_factory(shards=2), iceberg_sink_factory(shards=2)]
    owned = {sinks[0].part_fn(f"orders:{p}"): p for p in reversed(range(12))}
    shards = [sink.build_part("flow.iceberg", f"shard-00{s}", None) for s, sink in enumerate(sinks)]
    caplog.set_level(logging.INFO)
    for epoch in range(3):
        for s, shard in enumerate(shards):
            shard.write_batch([orders(owned[s], list(range(epoch * 5, epoch * 5 + 5)))])
        for shard in shards:
            shard.snapshot()
    # The local catalog's commit lock told each which table the other had committed:
    # it loaded that table before committing, and the catalog turned none away.
    assert [r.getMessage() for r in caplog.records if _LOST_RACE in r.getMessage()] == []
    assert len(snapshots(iceberg_catalog_config)) == 6
    assert sum(shard.stats.commit_retries for shard in shards) == 0
    expected = [(p, o) for p in sorted(owned.values()) for o in range(15)]
    assert rows_of(iceberg_catalog_config) == expected


def test_an_upsert_of_new_keys_reads_the_table_back_with_one_predicate(
    iceberg_sink_factory: IcebergSinkFactory,
    iceberg_catalog_config: IcebergCatalogConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A composite key, as a window's (group columns, window start): pyiceberg's upsert
    # reads the table back with one branch per key and walks that filter per data file.
    _, p = part(iceberg_sink_factory, mode="upsert", key_columns=["customer", "order_id"])
    for epoch in range(3):
        p.write_batch([orders(0, list(range(epoch * 100, epoch * 100 + 100)))])
        p.snapshot()
    nodes = 0
    visit = visitors.visit

    def counted(obj: Any, visitor: Any) -> Any:
        nonlocal nodes
        nodes += 1
        return visit(obj, visitor)

    monkeypatch.setattr(visitors, "visit", counted)
    p.write_batch([orders(0, list(range(300, 400)))])  # 100 keys the table does not hold
    p.snapshot()
    monkeypatch.undo()
    # One IN predicate over the most varied key column, visited per data file and pass:
    # a few dozen nodes, where a filter of a branch per key visited thousands.
    assert 0 < nodes <= 60
    assert snapshots(iceberg_catalog_config)[-1].summary.operation.value == "append"


def test_an_upsert_with_a_composite_key_replaces_the_keys_held_and_adds_the_rest(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    _, p = part(iceberg_sink_factory, mode="upsert", key_columns=["customer", "qty"])
    p.write_batch([orders(0, list(range(70)))])  # 35 keys (offset mod 7, offset mod 5)
    p.snapshot()
    p.write_batch([orders(0, list(range(70, 80)))])  # 10 of them again
    p.snapshot()
    p.write_batch([orders(1, list(range(3)), tag="w")])  # 3 keys of another customer tag
    p.snapshot()
    got = read_iceberg(iceberg_catalog_config)
    held = {
        (c, q): (part_, o)
        for c, q, part_, o in zip(
            got.column("customer").to_pylist(),
            got.column("qty").to_pylist(),
            got.column("_twg_source_partition").to_pylist(),
            got.column("_twg_source_offset").to_pylist(),
            strict=True,
        )
    }
    expected: dict[tuple[str, int], tuple[int, int]] = {}
    for o in range(80):
        expected[(f"v-c{o % 7}", o % 5)] = (0, o)
    for o in range(3):
        expected[(f"w-c{o % 7}", o % 5)] = (1, o)
    assert got.num_rows == len(expected) == 38
    assert held == expected
