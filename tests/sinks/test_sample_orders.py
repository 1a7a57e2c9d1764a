"""The orders flow's decoded orders, landed in Iceberg and PostgreSQL, read back equal.

``thalweg_bytewax/flows/orders.py`` writes the bundled sample orders to its raw Parquet lane and the
decoded, validated orders to the ``orders`` table in Iceberg and (with a DSN) in
PostgreSQL. The reference here is the decoded lane: the raw lane's payloads decoded
with the flow's own codec, keyed by record id. Each table, read back, holds exactly the
decoded records the contract passed, by record id, with the same values, in the column
types ``docs/tables.md`` maps them to: timestamps as ``timestamptz`` instants, decimals
as ``numeric(p,s)`` / ``decimal(p, s)``, nested values as ``jsonb`` in PostgreSQL and as
Iceberg lists and structs.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from bytewax.testing import run_main

from flows.orders import OrdersSettings, build_flow
from tests.sinks.targets import C, IcebergTarget, PostgresTarget
from thalweg_bytewax.config import SecretRef
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.typemap import iceberg_type_name, is_nested, postgres_type

pytestmark = pytest.mark.slow

N = 3_000


def shared(want: pa.Table, got: pa.Table) -> list[str]:
    """The decoded payload columns the table holds as decoded (the SQL adds others)."""
    names = [n for n in want.column_names if n in got.column_names and not n.startswith("_twg_")]
    assert {"order_id", "created_at", "total"} <= set(names), names
    return names


class Landed:
    """One run of the orders flow into Iceberg and PostgreSQL, and its decoded lane."""

    def __init__(self, root: Path, dsn: str, schema: str) -> None:
        settings = OrdersSettings(
            data_dir=root, sample_orders=N, postgres_dsn=SecretRef(dsn), postgres_schema=schema
        )
        run_main(build_flow(settings))
        raw = read_lane(settings.raw_lane, [C.record_id, "_twg_source_value"])
        assert raw.num_rows == N
        decoded = settings.codec().decode_batch(raw.column("_twg_source_value"))
        ok = decoded.ok_indices(raw.num_rows)
        lane = pa.Table.from_batches([decoded.batch]).append_column(
            C.record_id, pc.take(raw.column(C.record_id), ok)
        )
        self.decoded = lane.sort_by(C.record_id)
        self.iceberg = IcebergTarget(root)
        self.iceberg.config = settings.tables().catalog
        self.iceberg.table = f"{settings.iceberg_namespace}.orders"
        self.postgres = PostgresTarget(dsn, schema)


@pytest.fixture(scope="module")
def landed(pg_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Landed]:
    import psycopg

    schema = f"sample_orders_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
    yield Landed(tmp_path_factory.mktemp("orders"), pg_dsn, schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def expected(landed: Landed, got: pa.Table) -> pa.Table:
    """The decoded rows the table should hold: those the contract passed."""
    ids = got.column(C.record_id)
    assert pc.all(pc.is_in(ids, landed.decoded.column(C.record_id))).as_py()
    kept = landed.decoded.filter(pc.is_in(landed.decoded.column(C.record_id), ids))
    assert 0.9 * N < kept.num_rows <= landed.decoded.num_rows
    return kept


def json_ready(value: Any) -> Any:
    """A nested lane value as PostgreSQL's ``jsonb`` gives it back (decimals as numbers)."""
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_ready(v) for v in value]
    if isinstance(value, Decimal):
        return float(value)
    return value


def test_iceberg_reads_back_equal_to_the_decoded_lane(landed: Landed) -> None:
    target = landed.iceberg
    got = target.read().sort_by(C.record_id)
    assert got.num_rows == len(set(got.column(C.record_id).to_pylist()))
    want = expected(landed, got)
    columns = target.columns()
    for name in shared(want, got):
        lane_type = want.schema.field(name).type
        assert columns[name] == iceberg_type_name(lane_type), name
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name
    assert columns["created_at"] == "timestamptz"
    assert got.schema.field("created_at").type == pa.timestamp("us", tz="UTC")
    assert got.schema.field("total").type == want.schema.field("total").type


def test_postgres_reads_back_equal_to_the_decoded_lane(landed: Landed) -> None:
    target = landed.postgres
    got = target.read().sort_by(C.record_id)
    assert got.num_rows == len(set(got.column(C.record_id).to_pylist()))
    want = expected(landed, got)
    assert got.column(C.record_id).to_pylist() == want.column(C.record_id).to_pylist()
    assert (
        landed.iceberg.read().sort_by(C.record_id).column(C.record_id).to_pylist()
        == got.column(C.record_id).to_pylist()
    )
    columns = target.columns()
    spelled = {"timestamptz": "timestamp with time zone"}
    for name in shared(want, got):
        lane_type = want.schema.field(name).type
        ddl = postgres_type(lane_type)
        assert columns[name] == spelled.get(ddl, ddl), (name, columns[name])
        have, values = got.column(name).to_pylist(), want.column(name).to_pylist()
        if is_nested(lane_type):
            assert [json.loads(v) if v is not None else None for v in have] == [
                json_ready(v) for v in values
            ], name
        else:
            assert have == values, name
    assert columns["created_at"] == "timestamp with time zone"
    assert got.schema.field("created_at").type == pa.timestamp("us", tz="UTC")
    assert got.schema.field("total").type == want.schema.field("total").type
