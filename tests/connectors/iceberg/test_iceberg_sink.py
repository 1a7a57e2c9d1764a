"""IcebergSink against a real SqlCatalog on SQLite: provisioning, coverage, epochs, upsert.

Partition-level tests (build, write, snapshot, resume) in the style of the epoch-sink
tests; the helpers ``orders`` and ``part`` are reusable by a behaviour suite over all
table sinks (``iceberg_sink_factory`` builds the sink, ``read_iceberg`` reads it back).
"""

from __future__ import annotations

import hashlib
import pickle
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

from tests.fixtures.iceberg import IcebergSinkFactory, read_iceberg
from thalweg_bytewax.catalog import SchemaEvolutionError
from thalweg_bytewax.connectors.iceberg import (
    COVERAGE_PREFIX,
    IcebergCatalogConfig,
    IcebergSink,
    decode_spans,
    encode_spans,
)
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.errors import ConfigError, SinkTerminalError

TOPIC = "orders"


def orders(
    partition: int,
    offsets: list[int],
    *,
    topic: str = TOPIC,
    tag: str = "v",
    extra: dict[str, pa.Array] | None = None,
    qty_type: pa.DataType | None = None,
) -> pa.RecordBatch:
    """A decoded batch of one source partition with the locator columns."""
    n = len(offsets)
    ids = [
        hashlib.blake2b(f"{topic}/{partition}/{o}/{tag}".encode(), digest_size=16).digest()
        for o in offsets
    ]
    cols: dict[str, pa.Array] = {
        "order_id": pa.array([partition * 1_000_000 + o for o in offsets], pa.int64()),
        "customer": pa.array([f"{tag}-c{o % 7}" for o in offsets], pa.string()),
        "qty": pa.array([o % 5 for o in offsets], qty_type or pa.int32()),
        "_twg_source_topic": pa.array([topic] * n, pa.string()),
        "_twg_source_partition": pa.array([partition] * n, pa.int32()),
        "_twg_source_offset": pa.array(offsets, pa.int64()),
        "_twg_record_id": pa.array(ids, pa.binary(16)),
    }
    cols.update(extra or {})
    return pa.RecordBatch.from_pydict(cols)


def part(factory: IcebergSinkFactory, resume: dict[str, int] | None = None, **options: Any):
    sink = factory(**options)
    return sink, sink.build_part("flow.iceberg", "shard-000", resume)


def rows_of(config: IcebergCatalogConfig, table: str = "test.orders") -> list[tuple[int, int]]:
    t = read_iceberg(config, table)
    if t.num_rows == 0:
        return []
    return sorted(
        zip(
            t.column("_twg_source_partition").to_pylist(),
            t.column("_twg_source_offset").to_pylist(),
            strict=True,
        )
    )


def snapshots(config: IcebergCatalogConfig, table: str = "test.orders") -> list[Any]:
    return list(config.load().load_table(table).snapshots())


def test_nothing_is_visible_before_the_snapshot_and_one_commit_lands_per_epoch(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    # A tiny file target writes data files during the epoch; still one commit.
    _, p = part(iceberg_sink_factory, target_file_bytes=1)
    for b in range(4):
        p.write_batch([orders(0, list(range(b * 10, b * 10 + 10))), orders(1, [b])])
    assert rows_of(iceberg_catalog_config) == []  # files written, nothing committed
    assert p.snapshot() == {"orders:0": 40, "orders:1": 4}
    assert len(snapshots(iceberg_catalog_config)) == 1
    assert p.stats.commits == 1 and p.stats.data_files_written >= 4
    expected = [(0, o) for o in range(40)] + [(1, o) for o in range(4)]
    assert rows_of(iceberg_catalog_config) == expected
    # The coverage of each source partition is in the snapshot summary.
    summary = snapshots(iceberg_catalog_config)[-1].summary.additional_properties
    assert summary[f"{COVERAGE_PREFIX}flow.iceberg/orders:0"] == "0-39"
    assert summary[f"{COVERAGE_PREFIX}flow.iceberg/orders:1"] == "0-3"
    # An epoch without rows makes no snapshot.
    p.snapshot()
    assert len(snapshots(iceberg_catalog_config)) == 1


def test_slices_of_a_large_batch_fill_a_file_by_their_own_bytes(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    # Each slice shares the buffers of a 20,000-row batch (~1 MB): counted by those
    # buffers, every slice would reach a 256 KiB target and end a data file of 100 rows.
    big = orders(0, list(range(20_000)), extra={"note": pa.array(["x" * 40] * 20_000)})
    assert big.get_total_buffer_size() > 256 * 1024
    _, p = part(iceberg_sink_factory, target_file_bytes=256 * 1024)
    for start in range(0, 1_000, 100):
        p.write_batch([big.slice(start, 100)])
    p.snapshot()
    assert p.stats.data_files_written == 1
    assert rows_of(iceberg_catalog_config) == [(0, o) for o in range(1_000)]


def test_a_resumed_partition_skips_what_the_table_covers(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    _, first = part(iceberg_sink_factory)
    first.write_batch([orders(0, list(range(10)))])
    first.snapshot()
    first.write_batch([orders(0, list(range(10, 15)))])
    first.close()  # crash-like: the second epoch never committed
    # The recovery store lags (it says 4): the table's coverage says 0-9.
    _, again = part(iceberg_sink_factory, resume={"orders:0": 4})
    again.write_batch([orders(0, list(range(4, 20)))])
    assert again.stats.rows_skipped_replay == 6
    assert again.snapshot() == {"orders:0": 20}
    assert rows_of(iceberg_catalog_config) == [(0, o) for o in range(20)]
    summary = snapshots(iceberg_catalog_config)[-1].summary.additional_properties
    assert summary[f"{COVERAGE_PREFIX}flow.iceberg/orders:0"] == "0-19"  # carried forward


def test_int_to_long_needs_the_opt_in(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    _, p = part(iceberg_sink_factory)
    p.write_batch([orders(0, [0])])
    p.snapshot()
    _, strict = part(iceberg_sink_factory)
    with pytest.raises(SchemaEvolutionError, match=r"column `qty`.*allow_widening=True"):
        strict.write_batch([orders(0, [1], qty_type=pa.int64())])
    _, widening = part(iceberg_sink_factory, allow_widening=True)
    widening.write_batch([orders(0, [1], qty_type=pa.int64())])
    widening.snapshot()
    table = iceberg_catalog_config.load().load_table("test.orders")
    assert str(table.schema().find_field("qty").field_type) == "long"
    assert rows_of(iceberg_catalog_config) == [(0, 0), (0, 1)]


def test_hostile_identifiers_are_refused_before_anything_is_created(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    with pytest.raises(ConfigError, match="table"):
        iceberg_sink_factory(table='test."; DROP TABLE x; --')
    _, p = part(iceberg_sink_factory)
    with pytest.raises(SchemaEvolutionError, match="Robert"):
        p.write_batch([orders(0, [0], extra={"Robert'); DROP": pa.array([1])})])
    assert read_iceberg(iceberg_catalog_config).num_rows == 0


def test_a_table_name_refusal_does_not_advise_the_option_already_given(
    iceberg_sink_factory: IcebergSinkFactory,
) -> None:
    with pytest.raises(ConfigError, match="table name 'Orders'") as info:
        iceberg_sink_factory(table="test.Orders", identifiers="relaxed")
    assert 'identifiers="relaxed"' not in str(info.value)
    assert "rename it" in str(info.value)


def test_a_long_iceberg_name_is_refused_without_talking_about_another_database(
    iceberg_sink_factory: IcebergSinkFactory,
) -> None:
    with pytest.raises(ConfigError, match="at most 63 UTF-8 bytes") as table_info:
        iceberg_sink_factory(table="test." + "t" * 64)
    _, p = part(iceberg_sink_factory)
    with pytest.raises(SchemaEvolutionError, match="at most 63 UTF-8 bytes") as column_info:
        p.write_batch([orders(0, [0], extra={"c" * 64: pa.array([1])})])
    for info in (table_info, column_info):
        assert "PostgreSQL" not in str(info.value)
        assert "Iceberg" in str(info.value)


def test_upsert_keeps_the_last_row_per_key(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    with pytest.raises(ConfigError, match="needs `key_columns`"):
        iceberg_sink_factory(mode="upsert")
    _, p = part(iceberg_sink_factory, mode="upsert", key_columns=["customer"])
    p.write_batch([orders(0, list(range(14)))])  # customers v-c0..v-c6, twice each
    p.snapshot()
    p.write_batch([orders(0, list(range(14, 16)))])  # v-c0, v-c1 again
    p.snapshot()
    got = read_iceberg(iceberg_catalog_config)
    by_customer = dict(
        zip(got.column("customer").to_pylist(), got.column("_twg_source_offset").to_pylist(), strict=True)
    )
    assert got.num_rows == 7
    assert by_customer == {f"v-c{c}": (14 + c if c < 2 else 7 + c) for c in range(7)}


def test_an_upsert_replay_below_the_resumed_state_skips_rows_their_keys_replaced(
    iceberg_sink_factory: IcebergSinkFactory,
    iceberg_catalog_config: IcebergCatalogConfig,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Offsets 0-6 are replaced by 7-13 (same customers): the table holds 7-13 only.
    _, p = part(iceberg_sink_factory, mode="upsert", key_columns=["customer"])
    p.write_batch([orders(0, list(range(14)))])
    assert p.snapshot() == {"orders:0": 14}
    # A source that rewinds replays them after a resume: replays, not held-back rows.
    _, again = part(iceberg_sink_factory, {"orders:0": 14}, mode="upsert", key_columns=["customer"])
    again.write_batch([orders(0, list(range(14)))])
    assert again.stats.rows_skipped_replay == 14  # noqa: PLR2004
    # The keys of 0-6 were looked up: the table holds each from a later offset.
    assert "arrived after a resume" not in caplog.text
    again.snapshot()
    got = read_iceberg(iceberg_catalog_config)
    assert sorted(got.column("_twg_source_offset").to_pylist()) == list(range(7, 14))


def test_an_upsert_replay_looks_its_batches_up_in_one_read_of_the_partition(
    iceberg_sink_factory: IcebergSinkFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyiceberg.table import Table

    _, p = part(iceberg_sink_factory, mode="upsert", key_columns=["customer"])
    p.write_batch([orders(0, list(range(21)))])  # 0-13 replaced by 7-20 (same customers)
    assert p.snapshot() == {"orders:0": 21}
    _, again = part(iceberg_sink_factory, {"orders:0": 21}, mode="upsert", key_columns=["customer"])
    scans: list[str] = []
    scan = Table.scan

    def counted(self: Table, *args: Any, **kwargs: Any) -> Any:
        scans.append(str(kwargs.get("row_filter")))
        return scan(self, *args, **kwargs)

    monkeypatch.setattr(Table, "scan", counted)
    for low in (0, 5, 10):
        again.write_batch([orders(0, list(range(low, low + 5)))])
    assert again.stats.rows_skipped_replay == 15  # noqa: PLR2004
    # One read of what the target holds, one of the partition's keys; none per batch.
    assert len(scans) == 2, scans  # noqa: PLR2004


@pytest.mark.parametrize(
    "key", [["customer"], ["order_id"], ["customer", "order_id"]], ids="+".join
)
def test_an_upsert_row_held_across_a_resume_whose_key_was_not_replaced_is_refused(
    iceberg_sink_factory: IcebergSinkFactory,
    iceberg_catalog_config: IcebergCatalogConfig,
    key: list[str],
) -> None:
    # Offset 13 (customer c6, held from offset 6 only; its own order id) was held by a
    # step upstream while 0-12 and 14 committed.
    _, p = part(iceberg_sink_factory, mode="upsert", key_columns=key)
    p.write_batch([orders(0, list(range(13)))])
    p.write_batch([orders(0, [14])])
    assert p.snapshot() == {"orders:0": 15}
    _, again = part(iceberg_sink_factory, {"orders:0": 15}, mode="upsert", key_columns=key)
    with pytest.raises(ConfigError, match=r"rows of `orders:0` from offset 13 \(1 in this batch\)"):
        again.write_batch([orders(0, list(range(14)))])
    assert again.stats.rows_skipped_replay == 0
    held = (6, 8, 9, 10, 11, 12, 14) if key == ["customer"] else (*range(13), 14)
    assert rows_of(iceberg_catalog_config) == [(0, o) for o in held]


def test_partition_spec_from_configuration(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    ts = pa.array([1_700_000_000_000_000 + i * 3_600_000_000 * 7 for i in range(3)], pa.timestamp("us", tz="UTC"))
    _, p = part(
        iceberg_sink_factory, partition_by=["customer", "day(created_at)", "bucket(4, order_id)"]
    )
    p.write_batch([orders(0, [0, 1, 2], extra={"created_at": ts})])
    p.snapshot()
    table = iceberg_catalog_config.load().load_table("test.orders")
    spec = [(f.name, str(f.transform)) for f in table.spec().fields]
    assert spec == [
        ("customer", "identity"),
        ("created_at_day", "day"),
        ("order_id_bucket", "bucket[4]"),
    ]
    assert rows_of(iceberg_catalog_config) == [(0, 0), (0, 1), (0, 2)]
    with pytest.raises(ConfigError, match=r"field 'bucket\(order_id\)' does not parse"):
        iceberg_sink_factory(partition_by=["bucket(order_id)"])


def test_a_bytewax_run_lands_every_row_once(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    items = [(f"orders:{p}", orders(p, list(range(b * 5, b * 5 + 5)))) for b in range(6) for p in range(3)]
    flow = Dataflow("iceberg")
    op.output("out", op.input("in", flow, TestingSource(items)), iceberg_sink_factory(shards=2))
    run_main(flow)
    assert rows_of(iceberg_catalog_config) == [(p, o) for p in range(3) for o in range(30)]


def test_catalog_secrets_never_reach_reprs_or_messages(tmp_path: Any) -> None:
    config = IcebergCatalogConfig(
        type="rest",
        uri="https://user:hunter2@catalog.invalid/api",  # type: ignore[arg-type]
        token="tok-SECRET",  # type: ignore[arg-type]
        secret_properties={"s3.secret-access-key": "KEY-SECRET"},  # type: ignore[dict-item]
    )
    text = repr(config) + str(config) + repr(IcebergSink(config, "a.b"))
    for secret in ("hunter2", "tok-SECRET", "KEY-SECRET"):
        assert secret not in text
    with pytest.raises(ConfigError, match=r"look secret; move them to `secret_properties`") as info:
        IcebergCatalogConfig.of({"warehouse": "w", "properties": {"s3.secret-access-key": "KEY-SECRET"}})
    assert "KEY-SECRET" not in str(info.value)
    with pytest.raises(SinkTerminalError) as opened:
        IcebergCatalogConfig(type="sql", warehouse=str(tmp_path), uri="postgresql://u:hunter2@127.0.0.1:1/x").load()  # type: ignore[arg-type]
    assert "hunter2" not in str(opened.value) and opened.value.__cause__ is None
    assert pickle.loads(pickle.dumps(opened.value)).args == opened.value.args


def test_coverage_text_round_trips() -> None:
    cov = OffsetCoverage([(0, 99), (150, 199), (7000, 7000)])
    assert encode_spans(cov) == "0-99,150-199,7000-7000"
    assert decode_spans(encode_spans(cov)) == cov
    assert decode_spans("") == OffsetCoverage()
    with pytest.raises(ConfigError, match="coverage property"):
        decode_spans("1-x")


def test_an_epoch_of_a_hundred_mib_is_one_data_file_by_default(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    # As a bare `table.append` of the epoch writes it: every extra file costs a Parquet
    # writer and a manifest entry, which made the sink 0.8x the bare append.
    blob = pa.array([b"\0" * (1 << 20)] * 10, pa.binary())
    _, p = part(iceberg_sink_factory)
    for b in range(10):  # 100 MiB of Arrow in 10 batches, one epoch
        p.write_batch([orders(0, list(range(b * 10, b * 10 + 10)), extra={"blob": blob})])
    p.snapshot()
    table = iceberg_catalog_config.load().load_table("test.orders")
    files = list(table.scan().plan_files())
    assert len(files) == 1, [f.file.file_path for f in files]
    assert read_iceberg(iceberg_catalog_config).num_rows == 100
