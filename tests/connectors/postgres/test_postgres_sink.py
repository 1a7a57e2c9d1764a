"""PostgresSink against a real PostgreSQL: epochs, replays, provisioning, upserts, errors.

Every test gets a fresh schema (``pg_schema``); ``make_sink`` builds a sink for it and
:func:`tests.connectors.postgres.postgres_helpers.read_table` reads the target back as Arrow, so
these fold into a behaviour suite over every table sink.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from psycopg import sql

from tests.connectors.postgres.postgres_helpers import C, batch, read_table, table_exists
from thalweg_bytewax.catalog import SchemaEvolutionError
from thalweg_bytewax.connectors.postgres import PostgresSink
from thalweg_bytewax.contracts.spec import ColumnSpec, ObjectSpec
from thalweg_bytewax.errors import ConfigError, SinkTerminalError

MakeSink = Callable[..., PostgresSink]


_OPEN: list[Any] = []


@pytest.fixture
def make_sink(pg_dsn: str, pg_schema: str) -> Iterator[MakeSink]:
    """A factory of sinks writing ``<pg_schema>.orders`` (keyword arguments pass through).

    Partitions built with :func:`part` are closed at teardown.
    """

    def make(**kwargs: Any) -> PostgresSink:
        kwargs.setdefault("schema", pg_schema)
        kwargs.setdefault("shards", 1)
        kwargs.setdefault("retry_backoff", timedelta(seconds=0.01))
        return PostgresSink(kwargs.pop("dsn", pg_dsn), kwargs.pop("table", "orders"), **kwargs)

    yield make
    while _OPEN:
        _OPEN.pop().close()


def part(sink: PostgresSink, resume: dict[str, int] | None = None) -> Any:
    built = sink.build_part("flow.pg", "shard-000", resume)
    _OPEN.append(built)
    return built


def ids(dsn: str, schema: str, table: str = "orders") -> list[int]:
    got: list[int] = read_table(dsn, schema, table).column("id").to_pylist()
    return got


def test_rows_are_invisible_until_the_snapshot_then_land_with_the_coverage(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str
) -> None:
    p = part(make_sink())
    p.write_batch([batch("t", 0, [0, 1, 2]), batch("t", 1, [0])])
    assert not table_exists(pg_dsn, pg_schema, "orders") or ids(pg_dsn, pg_schema) == []
    assert p.snapshot() == {"t:0": 3, "t:1": 1}
    got = read_table(pg_dsn, pg_schema, "orders")
    assert sorted(got.column("id").to_pylist()) == [0, 0, 1, 2]
    assert got.schema.field("amount").type == pa.int64()
    assert got.schema.field(C.record_id).type == pa.binary()
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            sql.SQL("SELECT topic, partition, ranges::text FROM {} ORDER BY 1, 2").format(
                sql.Identifier(pg_schema, "_twg_coverage")
            )
        ).fetchall()
    assert rows == [("t", 0, "[[0, 2]]"), ("t", 1, "[[0, 0]]")]
    p.close()


def test_a_replay_is_skipped_by_the_coverage_row(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str
) -> None:
    first = part(make_sink())
    first.write_batch([batch("t", 0, list(range(10)))])
    first.snapshot()
    first.close()
    # A new run with no resume state (the recovery store lagged): the table's coverage says.
    again = part(make_sink())
    again.write_batch([batch("t", 0, list(range(5, 15)))])
    assert again.stats.rows_skipped_replay == 5
    again.snapshot()
    assert ids(pg_dsn, pg_schema) == list(range(15))


def test_a_new_field_mid_stream_adds_the_column_with_its_comment(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str
) -> None:
    contract = ObjectSpec(
        "orders",
        (
            ColumnSpec("id", pa.int64(), primary_key_position=1, description="order id"),
            ColumnSpec("coupon", pa.string(), description="the coupon code used"),
        ),
    )
    p = part(make_sink(contract=contract))
    p.write_batch([batch("t", 0, [0, 1])])
    p.snapshot()
    p.write_batch([batch("t", 0, [2], extra={"coupon": pa.array(["XMAS"])})])
    p.snapshot()
    got = read_table(pg_dsn, pg_schema, "orders")
    assert got.column("coupon").to_pylist() == [None, None, "XMAS"]
    with psycopg.connect(pg_dsn) as conn:
        comments: dict[str, str | None] = dict(
            conn.execute(
                "SELECT a.attname, col_description(a.attrelid, a.attnum) FROM pg_attribute a "
                "WHERE a.attrelid = %s::regclass AND a.attnum > 0",
                (sql.Identifier(pg_schema, "orders").as_string(conn),),
            ).fetchall()
        )
    assert comments["coupon"] == "the coupon code used"
    assert comments["id"] == "order id"
    assert comments[C.source_offset]  # the built-in description of a metadata column


def test_int_to_bigint_only_with_the_opt_in(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str
) -> None:
    p = part(make_sink())
    p.write_batch([batch("t", 0, [0], amount_type=pa.int32())])
    p.snapshot()
    refusing = part(make_sink())
    with pytest.raises(SchemaEvolutionError, match=r"column `amount` is `integer`.*allow_widening"):
        refusing.write_batch([batch("t", 0, [1], amount_type=pa.int64())])
    widening = part(make_sink(allow_widening=True))
    widening.write_batch([batch("t", 0, [1], amount_type=pa.int64())])
    widening.snapshot()
    got = read_table(pg_dsn, pg_schema, "orders")
    assert got.schema.field("amount").type == pa.int64()
    assert got.column("amount").to_pylist() == [0, 10]


def test_hostile_identifiers_are_quoted_when_relaxed_and_refused_when_strict(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str
) -> None:
    table = 'Or"ders; DROP TABLE x --'
    extra = {'we"ird col': pa.array([1.5])}
    with pytest.raises(ConfigError, match="table name"):
        make_sink(table=table)
    p = part(make_sink(table=table, identifiers="relaxed"))
    p.write_batch([batch("t", 0, [0], extra=extra)])
    p.snapshot()
    got = read_table(pg_dsn, pg_schema, table)
    assert got.column('we"ird col').to_pylist() == [1.5]
    strict = part(make_sink(table="orders"))
    with pytest.raises(SchemaEvolutionError, match="we"):
        strict.write_batch([batch("t", 0, [0], extra=extra)])


def test_upsert_by_the_contract_key_replaces_rows_and_keeps_the_last_of_an_epoch(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str
) -> None:
    contract = ObjectSpec("orders", (ColumnSpec("name", pa.string(), primary_key_position=1),))
    p = part(make_sink(mode="upsert", contract=contract))
    first = batch("t", 0, [0, 1, 2])
    first = first.set_column(
        first.schema.get_field_index("name"), "name", pa.array(["a", "b", "a"])
    )
    p.write_batch([first])
    p.snapshot()
    got = read_table(pg_dsn, pg_schema, "orders", order_by="name")
    assert got.column("name").to_pylist() == ["a", "b"]
    assert got.column("id").to_pylist() == [2, 1]  # the last row of key "a" in the epoch
    later = batch("t", 0, [3])
    later = later.set_column(later.schema.get_field_index("name"), "name", pa.array(["b"]))
    p.write_batch([later])
    p.snapshot()
    got = read_table(pg_dsn, pg_schema, "orders", order_by="name")
    assert got.column("id").to_pylist() == [2, 3]


def test_upsert_without_a_key_is_refused_at_build_time(make_sink: MakeSink) -> None:
    with pytest.raises(ConfigError, match=r"mode='upsert' expected `key_columns`"):
        make_sink(mode="upsert")


def test_upsert_into_a_table_without_a_unique_key_is_refused(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str
) -> None:
    p = part(make_sink())
    p.write_batch([batch("t", 0, [0])])
    p.snapshot()
    upsert = part(make_sink(mode="upsert", key_columns=["id"]))
    with pytest.raises(ConfigError, match=r"expected a unique index or primary key"):
        upsert.write_batch([batch("t", 0, [1])])


def test_a_terminal_error_fails_the_epoch_naming_the_table_and_writes_nothing(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str
) -> None:
    p = part(make_sink())
    p.write_batch([batch("t", 0, [0])])
    p.snapshot()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER TABLE {} ADD CONSTRAINT small CHECK (amount < 50)").format(
                sql.Identifier(pg_schema, "orders")
            )
        )
    p.write_batch([batch("t", 0, [1, 9])])
    with pytest.raises(
        SinkTerminalError, match=r"postgres sink `.*\.orders`.*SQLSTATE 23514"
    ) as info:
        p.snapshot()
    assert "retrying cannot help" in str(info.value)
    assert ids(pg_dsn, pg_schema) == [0]
    assert pickle.loads(pickle.dumps(info.value)).message == info.value.message


def test_the_dsn_is_never_in_messages_or_the_repr(pg_schema: str) -> None:
    secret = "s3cret-Pa55"
    sink = PostgresSink(
        f"postgresql://app:{secret}@127.0.0.1:9/db",
        "orders",
        schema=pg_schema,
        shards=1,
        connect_timeout=timedelta(seconds=1),
    )
    assert secret not in repr(sink)
    with pytest.raises(Exception) as info:  # noqa: PT011 - the class is checked below
        part(sink)
    assert secret not in str(info.value)
    assert "postgres sink" in str(info.value)


def _count_connections(sink: PostgresSink, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of connection the real sink's table opens from now on, in order."""
    opened: list[str] = []
    for kind in ("control", "data"):
        real = getattr(sink.pg, f"connect_{kind}")

        def counted(real: Any = real, kind: str = kind) -> Any:
            opened.append(kind)
            return real()

        monkeypatch.setattr(sink.pg, f"connect_{kind}", counted)
    return opened


def test_a_shard_over_many_source_partitions_opens_one_data_connection(
    pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = PostgresSink(pg_dsn, "orders", schema=pg_schema, shards=1)
    opened = _count_connections(sink, monkeypatch)
    p = part(sink)
    p.write_batch([batch("t", k, [0, 1]) for k in range(40)])
    # Between the coverage reads and the epoch's commit nothing holds a transaction open.
    with psycopg.connect(pg_dsn) as conn:
        idle = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' "
            "AND pid <> pg_backend_pid() AND datname = current_database()"
        ).fetchone()
    assert idle == (0,)
    p.snapshot()
    p.write_batch([batch("t", k, [2]) for k in range(40, 45)])
    p.snapshot()
    assert sorted(ids(pg_dsn, pg_schema)) == sorted([0, 1] * 40 + [2] * 5)
    # One data connection for every coverage read and commit; the control connection
    # only provisions (bookkeeping, then the table), never once per source partition.
    assert opened.count("data") == 1
    assert opened.count("control") == 2


def test_an_upsert_replay_below_the_resumed_state_skips_rows_their_keys_replaced(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Offset 0 is replaced by offset 2 (same key), so the table no longer holds offset 0.
    contract = ObjectSpec("orders", (ColumnSpec("name", pa.string(), primary_key_position=1),))
    first = batch("t", 0, [0, 1, 2])
    first = first.set_column(
        first.schema.get_field_index("name"), "name", pa.array(["a", "b", "a"])
    )
    p = part(make_sink(mode="upsert", contract=contract))
    p.write_batch([first])
    assert p.snapshot() == {"t:0": 3}
    # A source that rewinds replays all three after a resume: replays, not held rows.
    again = part(make_sink(mode="upsert", contract=contract), {"t:0": 3})
    again.write_batch([first])
    assert again.stats.rows_skipped_replay == 3  # noqa: PLR2004
    # The key of offset 0 was looked up: the table holds it from offset 2. No doubt left.
    assert "arrived after a resume" not in caplog.text
    again.snapshot()
    got = read_table(pg_dsn, pg_schema, "orders", order_by="name")
    assert got.column("id").to_pylist() == [2, 1]


@pytest.mark.parametrize(
    "key", [("name",), ("id",), ("name", "id"), ("at",), ("price",)], ids="+".join
)
def test_an_upsert_row_held_across_a_resume_whose_key_was_not_replaced_is_refused(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str, key: tuple[str, ...]
) -> None:
    # Offset 3 (key "c", no later row of it) was held by a step upstream while 0-2 and
    # 4 committed; the table holds "c" from offset 1 only. Keys of each type are
    # looked up as the table's column types.
    at, price = pa.timestamp("us", tz="UTC"), pa.decimal128(12, 2)
    types = {"name": pa.string(), "id": pa.int64(), "at": at, "price": price}
    contract = ObjectSpec(
        "orders",
        tuple(ColumnSpec(k, types[k], primary_key_position=i + 1) for i, k in enumerate(key)),
    )

    def named(offsets: list[int], names: list[str]) -> pa.RecordBatch:
        # `at` and `price` follow the name: rows of one name share them.
        extra = {
            "at": pa.array(
                [datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=ord(n)) for n in names], at
            ),
            "price": pa.array([Decimal(ord(n)) / 100 for n in names], price),
        }
        b = batch("t", 0, offsets, extra=extra)
        return b.set_column(b.schema.get_field_index("name"), "name", pa.array(names))

    p = part(make_sink(mode="upsert", contract=contract))
    p.write_batch([named([0, 1, 2], ["a", "c", "a"])])
    p.write_batch([named([4], ["b"])])
    assert p.snapshot() == {"t:0": 5}
    again = part(make_sink(mode="upsert", contract=contract), {"t:0": 5})
    with pytest.raises(ConfigError, match=r"rows of `t:0` from offset 3 \(1 in this batch\)"):
        again.write_batch([named([0, 1, 2, 3], ["a", "c", "a", "c"])])
    assert again.stats.rows_skipped_replay == 0
    got = read_table(pg_dsn, pg_schema, "orders", order_by="id")
    expected = [0, 1, 2, 4] if "id" in key else [1, 2, 4]
    assert got.column("id").to_pylist() == expected


def test_a_coverage_store_gets_each_committed_epoch_under_the_step_id(
    make_sink: MakeSink, tmp_path: Any
) -> None:
    from thalweg_bytewax.coverage.store import SqliteCoverageStore

    store = SqliteCoverageStore(tmp_path)
    p = part(make_sink(coverage_store=store))
    p.write_batch([batch("t", 0, [0, 1, 2]), batch("t", 1, [5])])
    p.snapshot()
    got = {(e.sink, e.topic, e.partition): e.coverage.to_list() for e in store.entries()}
    assert got == {("flow.pg", "t", 0): [[0, 2]], ("flow.pg", "t", 1): [[5, 5]]}


def test_a_coverage_store_is_refused_for_rows_without_a_locator(make_sink: MakeSink) -> None:
    with pytest.raises(ConfigError, match=r"coverage_store.*locators='absent'"):
        make_sink(locators="absent", coverage_store="somewhere")
