"""Table sinks fed rows without a source locator: ``locators="absent"``.

Rows from a stock Bytewax source (through ``twg.to_batches`` without a locator) or window
results carry no ``_twg_source_*`` columns. The Iceberg and PostgreSQL sinks take them
with ``locators="absent"``: appends are at-least-once, upserts by key effectively-once,
and each sink logs which applies once at start. Parametrised over both sinks through
:class:`Target` (build a sink for a fresh target, read the target back as Arrow), so a
behaviour suite over the table sinks can fold these in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main
from psycopg import sql

import thalweg_bytewax.operators as twg
from tests.connectors.postgres.postgres_helpers import batch as located_batch
from tests.connectors.postgres.postgres_helpers import read_table
from tests.fixtures.iceberg import read_iceberg
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig, IcebergSink
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.postgres import PostgresSink
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.runtime.epoch_sink import EpochSinkPartition

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("amount", pa.int64())]
)


def rows(ids: list[int], tag: str = "v") -> pa.RecordBatch:
    """Rows without a locator: ``id``, ``name = <tag><id>``, ``amount = id * 10``."""
    return pa.RecordBatch.from_pydict(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"{tag}{i}" for i in ids], pa.string()),
            "amount": pa.array([i * 10 for i in ids], pa.int64()),
        },
        schema=SCHEMA,
    )


@dataclass
class Target:
    """A table sink on a fresh target: ``make(**options)`` builds one, ``read()`` reads back."""

    name: str
    make: Callable[..., Any]
    read: Callable[[], pa.Table]


_OPEN: list[EpochSinkPartition] = []


def part(sink: Any, shard: int = 0, resume: dict[str, int] | None = None) -> EpochSinkPartition:
    built: EpochSinkPartition = sink.build_part("flow.out", f"shard-{shard:03d}", resume)
    _OPEN.append(built)
    return built


@pytest.fixture(params=["postgres", "iceberg"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    """Each table sink, building sinks for one fresh table."""
    if request.param == "postgres":
        dsn: str = request.getfixturevalue("pg_dsn")
        schema: str = request.getfixturevalue("pg_schema")

        def make_pg(**options: Any) -> PostgresSink:
            options.setdefault("shards", 1)
            options.setdefault("retry_backoff", timedelta(seconds=0.01))
            return PostgresSink(dsn, "items", schema=schema, **options)

        def read_pg() -> pa.Table:
            with _connect(dsn) as conn:
                exists = conn.execute(
                    "SELECT to_regclass(%s)", (sql.Identifier(schema, "items").as_string(None),)
                ).fetchone()
            if exists is None or exists[0] is None:
                return pa.table({})
            return read_table(dsn, schema, "items")

        yield Target("postgres", make_pg, read_pg)
    else:
        config = IcebergCatalogConfig(warehouse=str(request.getfixturevalue("tmp_path") / "wh"))

        def make_ice(**options: Any) -> IcebergSink:
            return IcebergSink(config, "test.items", **options)

        yield Target("iceberg", make_ice, lambda: read_iceberg(config, "test.items"))
    while _OPEN:
        _OPEN.pop().close()


def _connect(dsn: str) -> Any:
    import psycopg

    return psycopg.connect(dsn, autocommit=True)


def pairs(table: pa.Table) -> list[tuple[int, str]]:
    """``(id, name)`` of every row, sorted (duplicates kept)."""
    if table.num_rows == 0:
        return []
    return sorted(
        zip(table.column("id").to_pylist(), table.column("name").to_pylist(), strict=True)
    )


def test_unlocated_append_lands_every_row_of_a_stock_source(target: Target) -> None:
    items = [{"id": i, "name": f"v{i}", "amount": i * 10} for i in range(25)]
    flow = Dataflow("unlocated_append")
    up = op.input("in", flow, TestingSource(items))
    out = twg.to_batches("batches", up, schema=SCHEMA, max_rows=7, partitions=3, key=str)
    op.output("out", out.batches, target.make(locators="absent", shards=2))
    run_main(flow)
    assert pairs(target.read()) == [(i, f"v{i}") for i in range(25)]


def test_unlocated_rows_stay_invisible_until_the_snapshot(target: Target) -> None:
    sink = part(target.make(locators="absent"))
    sink.write_batch([rows([1, 2])])
    assert pairs(target.read()) == []
    assert sink.snapshot() == {}
    assert pairs(target.read()) == [(1, "v1"), (2, "v2")]
    assert sink.stats.rows_written == 2
    assert sink.stats.epochs_committed == 1


def test_unlocated_append_writes_a_replayed_epoch_again(target: Target) -> None:
    # A crash after the commit, before the recovery snapshot: the epoch replays into a
    # fresh partition and is appended again. At-least-once, as documented.
    first = part(target.make(locators="absent"))
    first.write_batch([rows([1, 2, 3])])
    first.snapshot()
    again = part(target.make(locators="absent"), resume={})
    again.write_batch([rows([1, 2, 3])])
    again.snapshot()
    assert pairs(target.read()) == sorted([(i, f"v{i}") for i in (1, 2, 3)] * 2)


def test_unlocated_upsert_holds_each_key_once_with_its_last_value(target: Target) -> None:
    options = {"locators": "absent", "mode": "upsert", "key_columns": ["id"]}
    first = part(target.make(**options))
    first.write_batch([rows([1, 2, 3], "a")])
    first.snapshot()
    # The replay of that epoch after a crash, then a later epoch that updates keys.
    again = part(target.make(**options), resume={})
    again.write_batch([rows([1, 2, 3], "a")])
    again.snapshot()
    again.write_batch([rows([2, 4], "b"), rows([4], "c")])
    again.snapshot()
    assert pairs(target.read()) == [(1, "a1"), (2, "b2"), (3, "a3"), (4, "c4")]


def test_an_empty_unlocated_batch_writes_nothing(target: Target) -> None:
    sink = part(target.make(locators="absent"))
    sink.write_batch([rows([])])
    sink.snapshot()
    assert pairs(target.read()) == []


@pytest.mark.parametrize(
    ("mode", "level", "words"),
    [("append", logging.WARNING, "at-least-once"), ("upsert", logging.INFO, "effectively-once")],
)
def test_the_guarantee_is_logged_once_at_start(
    target: Target, caplog: pytest.LogCaptureFixture, mode: str, level: int, words: str
) -> None:
    # An upserting Iceberg table has one writer; every other case logs once over 3 shards.
    shards = 1 if (target.name == "iceberg" and mode == "upsert") else 3
    sink = target.make(locators="absent", mode=mode, key_columns=["id"], shards=shards)
    with caplog.at_level(logging.INFO):
        for shard in range(shards):
            part(sink, shard).write_batch([rows([shard])])
    said = [r for r in caplog.records if "no source locator" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert said[0].levelno == level
    assert words in said[0].getMessage()


def test_rows_without_a_locator_are_refused_by_default_naming_the_option(target: Target) -> None:
    sink = part(target.make())
    with pytest.raises(ConfigError, match=r"`_twg_source_topic`.*locators='absent'"):
        sink.write_batch([rows([1])])


def test_a_sink_for_unlocated_rows_refuses_batches_with_a_locator(target: Target) -> None:
    sink = part(target.make(locators="absent"))
    with pytest.raises(ConfigError, match=r"locators='absent'.*`_twg_source_topic`.*'required'"):
        sink.write_batch([located_batch("t", 0, [0, 1])])
    assert pairs(target.read()) == []


def test_a_bad_locators_option_is_refused(target: Target) -> None:
    with pytest.raises(ConfigError, match=r"`locators` expected 'required' .* got 'maybe'"):
        target.make(locators="maybe")


def test_unlocated_iceberg_refuses_a_coverage_store(tmp_path: Any) -> None:
    with pytest.raises(ConfigError, match=r"`coverage_store` records source offsets"):
        IcebergSink(str(tmp_path / "wh"), "test.items", locators="absent",
                    coverage_store=str(tmp_path / "cov.db"))  # fmt: skip


def test_the_parquet_lane_refuses_rows_without_a_locator_naming_the_counter(tmp_path: Any) -> None:
    sink = part(ParquetSink(tmp_path / "lane"))
    try:
        with pytest.raises(ConfigError, match=r"`_twg_source_topic` is missing.*locator='counter'"):
            sink.write_batch([rows([1, 2])])
    finally:
        _OPEN.remove(sink)
        sink.close()


def test_an_upserting_iceberg_table_has_one_writer(tmp_path: Any) -> None:
    # Two shards upserting one key concurrently can both commit (pyiceberg checks data
    # files, not rows): the key would land twice without an error. Refused at build.
    config = IcebergCatalogConfig(warehouse=str(tmp_path / "wh"))
    for locators in ("absent", "required"):
        with pytest.raises(ConfigError, match="expected shards=1; got shards=2"):
            IcebergSink(config, "test.items", mode="upsert", key_columns=["id"],
                        locators=locators, shards=2)  # fmt: skip
    IcebergSink(config, "test.items", mode="append", locators="absent", shards=2)
