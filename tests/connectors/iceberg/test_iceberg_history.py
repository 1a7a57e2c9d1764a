"""IcebergSink: the table's snapshot history stays bounded, and exactly once survives it.

A sink commits a snapshot per epoch; without a bound the table's metadata file, read
and written whole at every commit, grows by a kilobyte an epoch for as long as the flow
runs. An epoch commit expires the oldest snapshots past ``keep_snapshots`` and carries
the coverage only they held, so a resumed sink still skips what the table holds, even
for a source partition named by no kept snapshot.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.table.snapshots import Operation, Snapshot, Summary, ancestors_of

from tests.connectors.iceberg.test_iceberg_sink import orders, part, rows_of
from tests.fixtures.iceberg import IcebergSinkFactory
from thalweg_bytewax.catalog.iceberg import CREATED_TABLE_PROPERTIES
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig, IcebergSink
from thalweg_bytewax.connectors.iceberg._history import (
    MIN_KEEP_SNAPSHOTS,
    carried_properties,
    plan_expiry,
    slack,
)
from thalweg_bytewax.connectors.iceberg._summary import (
    COMMIT_KEY,
    COVERAGE_PREFIX,
    RESET_PREFIX,
    encode_spans,
    read_coverage,
    united_coverage,
)
from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.errors import ConfigError

KEEP = MIN_KEEP_SNAPSHOTS


def table_of(config: IcebergCatalogConfig, name: str = "test.orders") -> Any:
    return config.load().load_table(name)


def chain_of(table: Any) -> list[Snapshot]:
    return list(ancestors_of(table.current_snapshot(), table.metadata))


def run_epochs(sink: IcebergSink, epochs: int, *, start: int = 0, idle_after: int = 2) -> int:
    """Partition 0 gets ten offsets every epoch, partition 1 only in the first two.

    Epochs are numbered from ``start`` (a run after another starts where it ended).
    The snapshots the run's commits expired.
    """
    p = sink.build_part("flow.iceberg", "shard-000", None)
    for epoch in range(start, start + epochs):
        batch = [orders(0, list(range(epoch * 10, epoch * 10 + 10)))]
        if epoch < idle_after:
            batch.append(orders(1, list(range(epoch * 5, epoch * 5 + 5))))
        p.write_batch(batch)
        p.snapshot()
    expired = p.stats.snapshots_expired
    p.close()
    return expired


@pytest.mark.parametrize("mode", ["append", "upsert"])
def test_the_history_is_bounded_and_an_idle_partition_is_not_written_twice(
    iceberg_sink_factory: IcebergSinkFactory,
    iceberg_catalog_config: IcebergCatalogConfig,
    mode: str,
) -> None:
    options: dict[str, Any] = {"keep_snapshots": KEEP}
    if mode == "upsert":
        options.update(mode="upsert", key_columns=["order_id"])
    epochs = 110
    expired = run_epochs(iceberg_sink_factory(**options), epochs)
    table = table_of(iceberg_catalog_config)
    snapshots = list(table.snapshots())
    assert expired > 0
    assert KEEP <= len(snapshots) <= KEEP + slack(KEEP)
    # Only the oldest went: every snapshot kept is on one unbroken ancestry.
    assert len(chain_of(table)) == len(snapshots)
    # Partition 1 was last written in epoch 1, by snapshots long expired: its coverage
    # was carried, so a resumed sink reads it whole.
    held, _ = read_coverage(table, "flow.iceberg")
    assert held["orders:1"] == OffsetCoverage([(0, 9)])
    assert held["orders:0"] == OffsetCoverage([(0, epochs * 10 - 1)])
    # A fresh run (no resume state) replays both partitions from the start: nothing is
    # written twice, and the new offsets land.
    _, again = part(iceberg_sink_factory, **options)
    again.write_batch([orders(0, list(range(epochs * 10 + 5))), orders(1, list(range(12)))])
    again.snapshot()
    again.close()
    want = sorted([(0, o) for o in range(epochs * 10 + 5)] + [(1, o) for o in range(12)])
    assert rows_of(iceberg_catalog_config) == want


def test_created_tables_merge_manifests_and_drop_old_metadata_files(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    epochs = 110
    run_epochs(iceberg_sink_factory(keep_snapshots=None), epochs)
    table = table_of(iceberg_catalog_config)
    for name, value in CREATED_TABLE_PROPERTIES.items():
        assert table.properties[name] == value
    # keep_snapshots=None: nothing expired.
    assert len(list(table.snapshots())) == epochs
    # One manifest an epoch would be 110; merged past pyiceberg's count of 100.
    manifests = table.current_snapshot().manifests(table.io)
    assert len(manifests) < 100
    # The metadata log keeps pyiceberg's 100 previous versions; older files are gone.
    assert len(table.metadata.metadata_log) <= 100
    kept_files = list((table_dir(table) / "metadata").glob("*.metadata.json"))
    assert len(kept_files) <= 101
    assert len(rows_of(iceberg_catalog_config)) == epochs * 10 + 10


def table_dir(table: Any) -> Path:
    return Path(table.location().removeprefix("file://"))


def test_the_tables_retention_properties_keep_more(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    sink = iceberg_sink_factory(keep_snapshots=KEEP)
    run_epochs(sink, 2)
    with table_of(iceberg_catalog_config).transaction() as tx:
        tx.set_properties({"history.expire.min-snapshots-to-keep": "90"})
    assert run_epochs(sink, 100, start=2) > 0
    kept = len(list(table_of(iceberg_catalog_config).snapshots()))
    assert 90 <= kept <= 90 + slack(90)
    with table_of(iceberg_catalog_config).transaction() as tx:
        tx.set_properties({"history.expire.max-snapshot-age-ms": str(86_400_000)})
    # Every snapshot is younger than a day: none expires.
    assert run_epochs(sink, 20, start=102) == 0
    assert len(list(table_of(iceberg_catalog_config).snapshots())) == kept + 20


def test_a_malformed_retention_property_is_refused_by_name(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    run_epochs(iceberg_sink_factory(keep_snapshots=None), KEEP + slack(KEEP) + 1)
    with table_of(iceberg_catalog_config).transaction() as tx:
        tx.set_properties({"history.expire.min-snapshots-to-keep": "ten"})
    with pytest.raises(ConfigError, match="history.expire.min-snapshots-to-keep"):
        plan_expiry(table_of(iceberg_catalog_config).metadata, KEEP)


def test_a_tagged_snapshot_is_kept(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    sink = iceberg_sink_factory(keep_snapshots=KEEP)
    run_epochs(sink, 3)
    table = table_of(iceberg_catalog_config)
    tagged = table.current_snapshot().snapshot_id
    table.manage_snapshots().create_tag(tagged, "first-load").commit()
    assert run_epochs(sink, 100, start=3) > 0
    table = table_of(iceberg_catalog_config)
    assert table.snapshot_by_id(tagged) is not None
    assert table.snapshot_by_name("first-load").snapshot_id == tagged
    assert len(list(table.snapshots())) <= KEEP + slack(KEEP) + 1


def test_keep_snapshots_below_the_retry_depth_is_refused(
    iceberg_sink_factory: IcebergSinkFactory,
) -> None:
    with pytest.raises(ConfigError, match="keep_snapshots"):
        iceberg_sink_factory(keep_snapshots=10)


# -- what an expiry carries, over random histories -------------------------------------

SINKS = ("a", "b")
KEYS = ("t:0", "t:1", "t:2")


@st.composite
def histories(draw: st.DrawFn) -> list[Snapshot]:
    """An ancestry, newest first, as sinks and other writers leave it.

    Each sink commit carries the full coverage of the keys it writes (what it held,
    plus new offsets), or only the new offsets with a reset; another writer's snapshot
    carries none and may remove rows.
    """
    truth: dict[str, OffsetCoverage] = {}
    snapshots: list[Snapshot] = []
    ids = itertools.count(1)
    for _ in range(draw(st.integers(1, 30))):
        props: dict[str, str] = {}
        operation = Operation.APPEND
        if draw(st.booleans()) or not snapshots:
            sink = draw(st.sampled_from(SINKS))
            props[COMMIT_KEY] = f"c{len(snapshots)}"
            for key in draw(st.sets(st.sampled_from(KEYS), min_size=1)):
                name = f"{sink}/{key}"
                lo = draw(st.integers(0, 50))
                new = OffsetCoverage([(lo, lo + draw(st.integers(0, 5)))])
                if draw(st.integers(0, 5)) == 0:
                    truth[name] = new
                    props[f"{RESET_PREFIX}{name}"] = "1"
                else:
                    truth[name] = truth.get(name, OffsetCoverage()) | new
                props[f"{COVERAGE_PREFIX}{name}"] = encode_spans(truth[name])
        elif draw(st.booleans()):
            operation = Operation.DELETE
        snapshot_id = next(ids)
        parent = snapshot_id - 1 if snapshot_id > 1 else None
        snapshots.append(snapshot(snapshot_id, parent, Summary(operation, **props)))
    return snapshots[::-1]


def snapshot(snapshot_id: int, parent: int | None, summary: Summary) -> Snapshot:
    return Snapshot.model_validate(
        {
            "snapshot-id": snapshot_id,
            "parent-snapshot-id": parent,
            "timestamp-ms": snapshot_id,
            "manifest-list": f"m{snapshot_id}",
            "summary": summary,
        }
    )


@settings(max_examples=300, deadline=None)
@given(chain=histories(), data=st.data())
def test_an_expiry_carries_what_the_whole_ancestry_says(
    chain: list[Snapshot], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(chain)))
    kept, tail = chain[:cut], chain[cut:]
    carried = carried_properties(kept, tail)
    commit = snapshot(
        10_000, chain[0].snapshot_id, Summary(Operation.APPEND, **{COMMIT_KEY: "new", **carried})
    )
    for sink in SINKS:
        assert united_coverage([commit, *kept], sink) == united_coverage(chain, sink)


def test_a_table_created_elsewhere_without_the_properties_is_named_once(
    iceberg_sink_factory: IcebergSinkFactory,
    iceberg_catalog_config: IcebergCatalogConfig,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import pyarrow as pa

    catalog = iceberg_catalog_config.load()
    catalog.create_namespace("test")
    catalog.create_table("test.orders", pa.schema([("order_id", pa.int64())]))
    run_epochs(iceberg_sink_factory(), 3)
    warnings = [r.getMessage() for r in caplog.records if "lacks" in r.getMessage()]
    assert len(warnings) == 1
    for name, value in CREATED_TABLE_PROPERTIES.items():
        assert f"`{name}={value}`" in warnings[0]
    assert "ALTER TABLE test.orders SET TBLPROPERTIES" in warnings[0]


def test_a_table_the_sink_created_is_not_named(
    iceberg_sink_factory: IcebergSinkFactory, caplog: pytest.LogCaptureFixture
) -> None:
    run_epochs(iceberg_sink_factory(), 3)
    assert not [r for r in caplog.records if "lacks" in r.getMessage()]
