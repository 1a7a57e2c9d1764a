"""IcebergSink: a table whose rows were deleted behind its coverage is refilled, or refused.

The coverage lives in the snapshot summaries, so ``table.delete()`` (a new snapshot
descending from the ones that recorded it) leaves it claiming rows the table no longer
holds. At start the sink checks the table (its current snapshot's record count; in
append mode a one-row scan per source partition): without a resume state the stale
coverage is dropped (the refilling commit marks the reset, so older snapshots stop
counting for that partition) and the rows are written again; with one, refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.connectors.iceberg.test_iceberg_sink import orders, part, rows_of
from tests.fixtures.iceberg import IcebergSinkFactory
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig
from thalweg_bytewax.coverage.store import SqliteCoverageStore
from thalweg_bytewax.errors import SinkTerminalError


def delete(config: IcebergCatalogConfig, predicate: Any = None) -> None:
    from pyiceberg import expressions

    ex: Any = expressions  # predicates' positional constructors are untyped in the stubs
    table = config.load().load_table("test.orders")
    table.delete(ex.AlwaysTrue() if predicate is None else ex.EqualTo(*predicate))


def first_run(factory: IcebergSinkFactory, **options: Any) -> dict[str, int]:
    _, p = part(factory, **options)
    p.write_batch([orders(0, list(range(10))), orders(1, list(range(5)))])
    state: dict[str, int] = p.snapshot()
    p.close()
    return state


@pytest.mark.parametrize("mode", ["append", "upsert"])
def test_a_deleted_table_is_refilled_without_resume_state(
    iceberg_sink_factory: IcebergSinkFactory,
    iceberg_catalog_config: IcebergCatalogConfig,
    tmp_path: Path,
    mode: str,
) -> None:
    options: dict[str, Any] = {"coverage_store": SqliteCoverageStore(tmp_path / "cov.sqlite3")}
    if mode == "upsert":
        options.update(mode="upsert", key_columns=["order_id"])
    first_run(iceberg_sink_factory, **options)
    delete(iceberg_catalog_config)
    assert rows_of(iceberg_catalog_config) == []
    # The source replays from offset 3 of partition 0 (0-2 left its retention).
    _, again = part(iceberg_sink_factory, **options)
    again.write_batch([orders(0, list(range(3, 12))), orders(1, list(range(5)))])
    again.snapshot()
    again.close()
    want = sorted([(0, o) for o in range(3, 12)] + [(1, o) for o in range(5)])
    assert rows_of(iceberg_catalog_config) == want
    store = options["coverage_store"]
    got = {(e.topic, e.partition): e.coverage.to_list() for e in store.entries()}
    assert got == {("orders", 0): [[3, 11]], ("orders", 1): [[0, 4]]}
    # The next start reads the coverage since the refill: replays are skipped, 0-2
    # are not claimed.
    _, third = part(iceberg_sink_factory, **options)
    assert third.open_partition("orders:0", "orders", 0).to_list() == [[3, 11]]
    third.write_batch([orders(0, list(range(3, 14)))])
    third.snapshot()
    third.close()
    assert rows_of(iceberg_catalog_config) == sorted([*want, (0, 12), (0, 13)])


def test_rows_of_one_partition_deleted_are_refilled_in_append_mode(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    first_run(iceberg_sink_factory)
    delete(iceberg_catalog_config, ("_twg_source_partition", 0))
    _, again = part(iceberg_sink_factory)
    again.write_batch([orders(0, list(range(10))), orders(1, list(range(5)))])
    again.snapshot()
    again.close()
    want = sorted([(0, o) for o in range(10)] + [(1, o) for o in range(5)])
    assert rows_of(iceberg_catalog_config) == want


def test_a_deleted_table_with_resume_state_is_refused(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    state = first_run(iceberg_sink_factory)
    delete(iceberg_catalog_config)
    for _ in range(2):  # nothing changes by refusing: refused again at the next start
        _, again = part(iceberg_sink_factory, state)
        with pytest.raises(SinkTerminalError) as info:
            again.write_batch([orders(0, list(range(10, 12)))])
        text = str(info.value)
        assert "holds no row of `orders:0`" in text and "fresh recovery directory" in text
        again.close()
    assert rows_of(iceberg_catalog_config) == []


def test_a_dropped_table_with_resume_state_is_refused(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    state = first_run(iceberg_sink_factory)
    iceberg_catalog_config.load().drop_table("test.orders")
    _, again = part(iceberg_sink_factory, state)
    with pytest.raises(SinkTerminalError, match=r"holds no row of `orders:0`.*dropped"):
        again.write_batch([orders(0, list(range(10, 12)))])
    again.close()


def test_a_dropped_table_is_refilled_and_the_store_forgets_what_it_held(
    iceberg_sink_factory: IcebergSinkFactory,
    iceberg_catalog_config: IcebergCatalogConfig,
    tmp_path: Path,
) -> None:
    store = SqliteCoverageStore(tmp_path / "cov.sqlite3")
    first_run(iceberg_sink_factory, coverage_store=store)
    iceberg_catalog_config.load().drop_table("test.orders")
    _, again = part(iceberg_sink_factory, coverage_store=store)
    again.write_batch([orders(0, list(range(3, 12)))])  # 0-2 left the source's retention
    again.snapshot()
    again.close()
    assert rows_of(iceberg_catalog_config) == [(0, o) for o in range(3, 12)]
    got = {(e.topic, e.partition): e.coverage.to_list() for e in store.entries()}
    assert got[("orders", 0)] == [[3, 11]]
