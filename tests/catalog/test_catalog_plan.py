"""Provisioning as a plan, and the write-boundary reconciliation."""

from __future__ import annotations

import datetime as dt
import pickle

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.typemap.test_typemap import ARROW_TYPES
from thalweg_bytewax.catalog import (
    AddColumn,
    Column,
    CreateTable,
    Refuse,
    SchemaEvolutionError,
    SetComment,
    TableShape,
    WidenColumn,
    WriteBoundaryError,
    plan,
    reconcile,
)
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS
from thalweg_bytewax.typemap import canonical_type

_NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
TARGETS = ["postgres", "iceberg"]


def _holds(t, target):
    try:
        canonical_type(t, target)
    except SchemaError:
        return False
    return True


def schemas(target):
    fields = st.tuples(_NAMES, ARROW_TYPES.filter(lambda t: _holds(t, target)), st.booleans())
    return st.lists(fields, min_size=1, max_size=6, unique_by=lambda f: f[0]).map(
        lambda fs: pa.schema([pa.field(n, t, nullable=nl) for n, t, nl in fs])
    )


# -- properties -------------------------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
@given(data=st.data())
def test_planning_an_absent_table_creates_exactly_the_schema(target, data):
    schema = data.draw(schemas(target))
    p = plan("t", None, schema, target=target)
    (create,) = p.steps
    assert isinstance(create, CreateTable)
    cols = create.columns
    assert [c.name for c in cols] == schema.names
    assert [c.type for c in cols] == [canonical_type(f.type, target) for f in schema]
    assert [c.nullable for c in cols] == [f.nullable for f in schema]
    assert p.result.columns == cols


@pytest.mark.parametrize("target", TARGETS)
@given(data=st.data())
def test_planning_a_table_that_holds_the_schema_is_empty(target, data):
    schema = data.draw(schemas(target))
    created = plan("t", None, schema, target=target).result
    assert plan("t", created, schema, target=target).steps == ()


@pytest.mark.parametrize("target", TARGETS)
@given(data=st.data(), allow_widening=st.booleans())
def test_planning_is_idempotent(target, data, allow_widening):
    before = data.draw(schemas(target))
    after = data.draw(schemas(target))
    current = plan("t", None, before, target=target).result
    first = plan("t", current, after, target=target, allow_widening=allow_widening)
    again = plan("t", first.result, after, target=target, allow_widening=allow_widening)
    assert again.changes == ()
    # What was refused stays refused, and nothing new is.
    assert {r.name for r in again.refusals} == {r.name for r in first.refusals}


# -- evolution rules ----------------------------------------------------------------------


def _table(*cols):
    return TableShape(tuple(cols))


def test_additions_are_always_planned_nullable_with_their_comment():
    current = _table(Column("id", pa.int64(), nullable=False))
    desired = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("note", pa.string(), nullable=False)]
    )
    p = plan("orders", current, desired, target="postgres", comments={"note": "free text"})
    assert p.steps == (AddColumn("orders", Column("note", pa.string(), True, "free text")),)


@pytest.mark.parametrize(
    ("old", "new", "target"),
    [
        (pa.int32(), pa.int64(), "postgres"),
        (pa.int32(), pa.int64(), "iceberg"),
        (pa.float32(), pa.float64(), "iceberg"),
        (pa.decimal128(10, 2), pa.decimal128(14, 2), "iceberg"),
        (pa.decimal128(10, 2), pa.decimal128(14, 4), "postgres"),
    ],
)
def test_widening_needs_the_opt_in(old, new, target):
    current = _table(Column("amount", old))
    desired = pa.schema([("amount", new)])
    refused = plan("public.orders", current, desired, target=target)
    with pytest.raises(SchemaEvolutionError) as info:
        refused.raise_if_refused()
    msg = str(info.value)
    assert msg.startswith(f"{target} table `public.orders`: column `amount`")
    assert "set allow_widening=True" in msg
    widened = plan("public.orders", current, desired, target=target, allow_widening=True)
    assert widened.steps == (WidenColumn("public.orders", "amount", old, new),)
    widened.raise_if_refused()


@pytest.mark.parametrize(
    ("old", "new", "target", "old_text", "new_text", "remedy"),
    [
        (pa.int64(), pa.float64(), "postgres", "bigint", "double precision", "cast the column"),
        (pa.string(), pa.int64(), "postgres", "text", "bigint", "cast the column"),
        (pa.decimal128(10, 2), pa.decimal128(12, 3), "iceberg", "decimal(10, 2)", "decimal(12, 3)", "cast"),
        (pa.string(), pa.struct([("a", pa.int32())]), "postgres", "text", "jsonb", '"payload": "json"'),
        (pa.string(), pa.list_(pa.int32()), "iceberg", "string", "list<int>", '"payload": "json"'),
        (pa.timestamp("us"), pa.timestamp("ms", "UTC"), "postgres", "timestamp", "timestamptz", '"payload": "utc"'),
        (pa.int64(), pa.int32(), "iceberg", None, None, None),  # narrower fits: no change
    ],
)
def test_anything_else_is_refused_naming_table_column_old_and_new(
    old, new, target, old_text, new_text, remedy
):
    current = _table(Column("payload", old))
    p = plan("sales.orders", current, pa.schema([("payload", new)]), target=target)
    if old_text is None:
        assert p.steps == ()
        return
    (refusal,) = p.steps
    assert isinstance(refusal, Refuse)
    with pytest.raises(SchemaEvolutionError) as info:
        p.raise_if_refused()
    msg = str(info.value)
    assert "`sales.orders`" in msg and "column `payload`" in msg
    assert f"`{old_text}`" in msg and f"`{new_text}`" in msg and remedy in msg
    assert msg[0].islower() and not msg.endswith(".")


def test_an_opted_in_conversion_is_no_refusal():
    current = _table(Column("doc", pa.string()), Column("at", pa.timestamp("us")))
    desired = pa.schema([("doc", pa.struct([("a", pa.int32())])), ("at", pa.timestamp("ms", "UTC"))])
    assert plan("t", current, desired, target="postgres").refusals
    assert plan("t", current, desired, target="postgres", conversions={"doc": "json", "at": "utc"}).steps == ()


def test_columns_the_batch_lacks_are_fine_unless_not_null_without_default():
    current = _table(
        Column("id", pa.int64(), nullable=False),
        Column("opt", pa.string()),
        Column("made", pa.timestamp("us", "UTC"), nullable=False, has_default=True),
        Column("must", pa.int32(), nullable=False),
    )
    p = plan("t", current, pa.schema([pa.field("id", pa.int64(), nullable=False)]), target="postgres")
    assert len(p.steps) == 1
    assert [r.name for r in p.refusals] == ["must"]
    assert "NOT NULL" in p.refusals[0].message


def test_every_refusal_is_known_before_anything_is_written():
    current = _table(Column("a", pa.int64()), Column("b", pa.string()))
    desired = pa.schema([("a", pa.float64()), ("b", pa.int64()), ("c", pa.int64()), ("Bad Name", pa.int64())])
    p = plan("t", current, desired, target="postgres")
    with pytest.raises(SchemaEvolutionError, match="3 changes refused") as info:
        p.raise_if_refused()
    for name in ("`a`", "`b`", "Bad Name"):
        assert name in str(info.value)


def test_the_error_is_a_config_and_schema_error_and_pickles():
    current = _table(Column("a", pa.int64()))
    with pytest.raises(SchemaEvolutionError) as info:
        plan("t", current, pa.schema([("a", pa.string())]), target="postgres").raise_if_refused()
    err = info.value
    assert isinstance(err, ConfigError) and isinstance(err, SchemaError)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is SchemaEvolutionError and str(back) == str(err)
    assert type(err).__module__ == "thalweg_bytewax.catalog"


HOSTILE = '"; DROP TABLE orders; --'


def test_a_hostile_column_name_is_refused_in_strict_mode_and_carried_verbatim_in_relaxed():
    desired = pa.schema([("id", pa.int64()), (HOSTILE, pa.string())])
    strict = plan("t", None, desired, target="postgres")
    assert any(isinstance(s, Refuse) and s.name == HOSTILE for s in strict.steps)
    with pytest.raises(SchemaEvolutionError, match="identifiers"):
        strict.raise_if_refused()
    relaxed = plan("t", None, desired, target="postgres", identifiers="relaxed")
    (create,) = relaxed.steps
    assert isinstance(create, CreateTable)
    assert [c.name for c in create.columns] == ["id", HOSTILE]  # the adapter quotes it


def test_a_psycopg_identifier_quotes_a_relaxed_name():
    sql = pytest.importorskip("psycopg.sql")
    text = sql.SQL("ALTER TABLE {} ADD COLUMN {} text").format(
        sql.Identifier("t"), sql.Identifier(HOSTILE)
    ).as_string(None)
    assert text == 'ALTER TABLE "t" ADD COLUMN """; DROP TABLE orders; --" text'


# -- comments -----------------------------------------------------------------------------


def test_comments_come_from_the_contract_and_the_metadata_columns():
    from thalweg_bytewax.contracts.spec import ColumnSpec, ObjectSpec

    obj = ObjectSpec(
        "orders",
        (
            ColumnSpec("id", pa.int64(), required=True, description="Order id"),
            ColumnSpec("note", pa.string()),
        ),
    )
    rid = DEFAULT_COLUMNS.record_id
    desired = pa.schema([*obj.arrow_schema, pa.field(rid, pa.binary(16), nullable=False)])
    (create,) = plan("orders", None, desired, target="iceberg").steps
    assert isinstance(create, CreateTable)
    comments = {c.name: c.comment for c in create.columns}
    assert comments == {"id": "Order id", "note": None, rid: DEFAULT_COLUMNS.descriptions()[rid]}
    assert "record id" in (comments[rid] or "")
    # An explicit mapping wins over the schema's description.
    (create,) = plan("orders", None, desired, target="iceberg", comments={"id": "Id"}).steps
    assert isinstance(create, CreateTable)
    assert create.columns[0].comment == "Id"


def test_comments_are_set_when_they_change_and_never_erased():
    current = _table(Column("id", pa.int64(), comment="old"), Column("note", pa.string(), comment="human"))
    desired = pa.schema([("id", pa.int64()), ("note", pa.string())])
    p = plan("t", current, desired, target="postgres", comments={"id": "new"})
    assert p.steps == (SetComment("t", "id", "new"),)
    note = p.result.column("note")
    assert note is not None and note.comment == "human"
    assert plan("t", p.result, desired, target="postgres", comments={"id": "new"}).steps == ()


def test_every_metadata_column_has_a_builtin_description():
    assert set(DEFAULT_COLUMNS.descriptions()) == DEFAULT_COLUMNS.names
    assert all(DEFAULT_COLUMNS.descriptions().values())


# -- reconcile ----------------------------------------------------------------------------


def _shape(schema, target, **kw):
    return plan("t", None, schema, target=target, **kw).result


@pytest.mark.parametrize("target", TARGETS)
def test_reconcile_casts_lossless_differences(target):
    shape = _table(
        Column("id", pa.int64(), nullable=False),
        Column("ts", pa.timestamp("us", "UTC")),
        Column("amount", pa.decimal128(12, 2)),
        Column("missing", pa.string()),
    )
    batch = pa.RecordBatch.from_pydict(
        {
            "amount": pa.array([1, 2], pa.decimal128(10, 2)),
            "id": pa.array([1, 2], pa.int32()),
            "ts": pa.array([1, 2], pa.timestamp("ms", "UTC")),
        }
    )
    out = reconcile(batch, shape, target=target)
    assert out.schema.names == ["id", "ts", "amount", "missing"]
    assert out.column("id").to_pylist() == [1, 2]
    assert out.column("ts").type == pa.timestamp("us", "UTC")
    assert out.column("ts").to_pylist()[1] == dt.datetime(1970, 1, 1, 0, 0, 0, 2000, tzinfo=dt.UTC)
    assert out.column("missing").null_count == 2


def test_reconcile_writes_nested_values_as_json_into_jsonb():
    schema = pa.schema(
        [
            ("doc", pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))])),
            ("tags", pa.map_(pa.string(), pa.int64())),
            ("u", pa.dense_union([pa.field("n", pa.int64()), pa.field("s", pa.string())])),
        ]
    )
    shape = _shape(schema, "postgres")
    u = pa.UnionArray.from_dense(
        pa.array([0, 1], pa.int8()), pa.array([0, 0], pa.int32()), [pa.array([5]), pa.array(["x"])], ["n", "s"]
    )
    batch = pa.RecordBatch.from_arrays(
        [pa.array([{"a": 1, "b": ["x"]}, None], schema.field("doc").type),
         pa.array([[("k", 1)], []], schema.field("tags").type), u],
        schema=schema,
    )
    out = reconcile(batch, shape, target="postgres")
    assert isinstance(out.column("doc").type, pa.JsonType)
    assert out.column("doc").storage.to_pylist() == ['{"a":1,"b":["x"]}', None]
    assert out.column("tags").storage.to_pylist() == ['{"k":1}', "{}"]
    assert out.column("u").storage.to_pylist() == ["5", '"x"']


def test_reconcile_refuses_nested_into_text_unless_json_is_opted_into():
    shape = _table(Column("doc", pa.string()))
    batch = pa.RecordBatch.from_pydict({"doc": pa.array([{"a": 1}])})
    with pytest.raises(WriteBoundaryError, match=r'column `doc`.*struct.*conversions=\{"doc": "json"\}'):
        reconcile(batch, shape, target="iceberg", table="t")
    out = reconcile(batch, shape, target="iceberg", conversions={"doc": "json"})
    assert out.column("doc").to_pylist() == ['{"a":1}']


@pytest.mark.parametrize("target", TARGETS)
def test_reconcile_refuses_a_zone_mismatch_unless_utc_is_opted_into(target):
    shape = _table(Column("at", pa.timestamp("us")))
    aware = pa.array([dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC)], pa.timestamp("ms", "UTC"))
    batch = pa.RecordBatch.from_pydict({"at": aware})
    with pytest.raises(WriteBoundaryError, match=r'column `at`.*"utc"'):
        reconcile(batch, shape, target=target)
    out = reconcile(batch, shape, target=target, conversions={"at": "utc"})
    assert out.column("at").to_pylist() == [dt.datetime(2024, 1, 1, 12)]  # noqa: DTZ001
    naive = pa.RecordBatch.from_pydict({"at": out.column("at")})
    zoned = _table(Column("at", pa.timestamp("us", "UTC")))
    with pytest.raises(WriteBoundaryError):
        reconcile(naive, zoned, target=target)
    back = reconcile(naive, zoned, target=target, conversions={"at": "utc"})
    assert back.column("at").to_pylist() == aware.to_pylist()


def test_reconcile_never_turns_a_value_into_null():
    shape = _table(Column("n", pa.int32(), nullable=False))
    big = pa.RecordBatch.from_pydict({"n": pa.array([2**40], pa.int64())})
    with pytest.raises(WriteBoundaryError, match="column `n`"):
        reconcile(big, shape, target="postgres")
    nulls = pa.RecordBatch.from_pydict({"n": pa.array([1, None], pa.int32())})
    with pytest.raises(WriteBoundaryError, match=r"NOT NULL.*1 of 2"):
        reconcile(nulls, shape, target="postgres")
    ns = pa.RecordBatch.from_pydict({"ts": pa.array([1_500], pa.timestamp("ns"))})
    with pytest.raises(WriteBoundaryError, match="column `ts`"):
        reconcile(ns, _table(Column("ts", pa.timestamp("us"))), target="postgres")
    truncated = reconcile(ns, _table(Column("ts", pa.timestamp("us"))), target="postgres",
                          conversions={"ts": "truncate"})
    assert truncated.column("ts").cast(pa.int64()).to_pylist() == [1]


def test_reconcile_refuses_a_column_the_table_lacks():
    batch = pa.RecordBatch.from_pydict({"id": [1], "extra": [2]})
    with pytest.raises(WriteBoundaryError, match="column `extra`") as info:
        reconcile(batch, _table(Column("id", pa.int64())), target="postgres")
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is WriteBoundaryError and str(back) == str(info.value)


def test_reconcile_writes_durations_as_iceberg_microseconds():
    schema = pa.schema([("d", pa.duration("ms"))])
    batch = pa.RecordBatch.from_pydict({"d": pa.array([3], pa.duration("ms"))})
    out = reconcile(batch, _shape(schema, "iceberg"), target="iceberg")
    assert out.column("d").type == pa.int64() and out.column("d").to_pylist() == [3000]


def test_the_tables_page_example_runs():
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "tables.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    exec(compile(code, "docs/tables.md", "exec"), {})


def test_union_values_as_json_keep_times_exact():
    from datetime import time as clock

    from thalweg_bytewax.catalog.reconcile import to_json_text

    arr = pa.UnionArray.from_dense(
        pa.array([0, 1, 0], pa.int8()),
        pa.array([0, 0, 1], pa.int32()),
        [pa.array([clock(1, 2, 3, 16000), clock(4, 5, 6)], pa.time64("us")), pa.array([b"\x01"])],
        ["t", "b"],
    )
    assert to_json_text(arr).to_pylist() == ['"01:02:03.016000"', '"AQ=="', '"04:05:06"']
