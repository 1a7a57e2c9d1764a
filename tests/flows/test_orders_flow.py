"""flows.orders end to end: embedded default and Kafka, raw lane, orders table and DLQ."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute below
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import run_main

from flows.orders import SCHEMA_DIR, OrdersSettings, build_flow
from tests.helpers import locator_of
from thalweg_bytewax.contracts import explode_audit, read_audit, read_rule_registry
from thalweg_bytewax.dev._orders_sample import _bad_payload, sample_order_at
from thalweg_bytewax.dev.samples import ORDER_AVRO_SCHEMA, encode_order_avro
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.lanes.dlq import rejected_from_dlq_batch
from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.testing import produce, produce_sample_orders

COLS = MetadataColumns()
REPO = Path(__file__).resolve().parents[2]
N = 4_000
PARTITIONS = 4  # SampleOrdersSource default


def sample(index: int) -> dict:
    """Order number `index` of the embedded sample (the source's own derivation)."""
    return sample_order_at(7, index)


def contract_breakers(n: int) -> dict[int, str]:
    """Orders that decode but break the contract, and the rule each one breaks."""
    rules = ["total", "currency", "customer_id", "coupon"]
    return {i: rules[(i // 1000) % 4] for i in range(n) if i % 1000 == 250}


def bad_indexes(n: int) -> dict[int, str]:
    out = {}
    for i in range(n):
        good = encode_order_avro(sample(i))
        v = _bad_payload(i, good)
        if v != good:
            out[i] = (
                "null_payload"
                if v is None
                else ("unknown_schema" if v[1:5] == b"\0\0\0c" else "malformed")
            )
    return out


def read_table(settings: OrdersSettings, table: str) -> pa.Table:
    """A table of the flow, read back from its Iceberg warehouse."""
    from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig

    catalog = IcebergCatalogConfig(warehouse=str(settings.warehouse)).load()
    return catalog.load_table(f"{settings.iceberg_namespace}.{table}").scan().to_arrow()


def test_bundled_schema_is_the_sample_schema():
    assert json.loads((SCHEMA_DIR / "1.avsc").read_text()) == ORDER_AVRO_SCHEMA


@pytest.mark.heavy
def test_embedded_default_fills_raw_decoded_and_dlq_lanes(tmp_path):
    settings = OrdersSettings(data_dir=tmp_path, sample_orders=N)
    run_main(build_flow(settings))

    raw = read_lane(settings.raw_lane)
    orders = read_table(settings, "orders")
    dlq = read_lane(settings.dlq_lane)
    assert raw.num_rows == N
    assert orders.num_rows + dlq.num_rows == N

    def index(t, row) -> int:
        offset: int = t[COLS.source_offset][row].as_py()
        partition: int = t[COLS.source_partition][row].as_py()
        return offset * PARTITIONS + partition

    bad = bad_indexes(N)
    assert len(bad) == 4 and set(bad.values()) == {"malformed", "unknown_schema", "null_payload"}
    rejected = {
        locator_of(r).offset * PARTITIONS + locator_of(r).partition: r
        for r in rejected_from_dlq_batch(dlq.combine_chunks().to_batches()[0])
    }
    breakers = contract_breakers(N)
    assert len(breakers) == 4
    assert set(rejected) == set(bad) | set(breakers)
    for i, column in breakers.items():
        r = rejected[i]
        assert r.reason == "dq" and r.step_id == "orders.contract", r
        assert r.rules and all(column in rule for rule in r.rules), (i, r.rules)
        # The decoded lane no longer carries the payload bytes: the DLQ row has the
        # decoded row as JSON, and its record id finds the envelope in the raw lane.
        assert r.row_json is not None, r
        assert r.raw_value is None and json.loads(r.row_json)["order_id"] == sample(i)["order_id"]
        raw_row = raw.filter(
            pa.compute.equal(raw[COLS.record_id], pa.scalar(r.record_id, pa.binary(16)))
        )
        assert raw_row[COLS.source_value].to_pylist() == [encode_order_avro(sample(i))]
    for i, kind in bad.items():
        r = rejected[i]
        assert r.reason == "decode" and r.step_id == "orders.decode"
        loc = f"`orders:{i % PARTITIONS}@{i // PARTITIONS}`"
        assert r.message.startswith(f"avro decode failed at {loc} ({kind})"), r.message
        assert r.raw_value == _bad_payload(i, encode_order_avro(sample(i)))
        assert r.raw_key == str(sample(i)["customer_id"]).encode()
    assert "schema id 99" in rejected[1500].message

    # Orders table: every good order once, locator kept; spot-check values.
    assert {*COLS.locator_columns(), COLS.emit_ts, "amount_eur", "line_count"} <= set(
        orders.schema.names
    )
    seen = {index(orders, row): row for row in range(orders.num_rows)}
    assert set(seen) == set(range(N)) - set(bad) - set(breakers)
    for i in (0, 1, 2, 3, 499, 501, 1999, 3998, 3999):
        row = orders.slice(seen[i], 1).to_pylist()[0]
        want = sample(i)
        for name in ("order_id", "customer_id", "created_at", "status", "total", "coupon"):
            assert row[name] == want[name], (i, name)
        assert row["amount_eur"] == want["total"] and row["line_count"] == len(want["items"])
        address = want["shipping_address"] or {}
        assert row["ship_city"] == address.get("city"), i
    raw_ids = {index(raw, row): raw[COLS.record_id][row].as_py() for row in range(raw.num_rows)}
    assert orders.num_rows == len(set(orders[COLS.record_id].to_pylist()))
    for i in (0, 501, 3999):  # the table keeps each record's id from the raw lane
        assert orders[COLS.record_id][seen[i]].as_py() == raw_ids[i]

    # Audit: one verdict per decoded record, resolvable per rule through the registry.
    audit = read_audit(settings.audit_lane)
    assert audit.num_rows == N - len(bad)
    registry = read_rule_registry(settings.data_dir / "rules")
    per_rule = explode_audit(audit, registry)
    assert per_rule.num_rows == audit.num_rows * registry.num_rows
    failed = per_rule.filter(pa.compute.not_equal(per_rule["rule_verdict"], "pass")).to_pylist()
    by_record: dict[bytes, set[str]] = {}
    for row in failed:
        by_record.setdefault(row[COLS.record_id], set()).add(row["rule"])
    assert len(by_record) == len(breakers)
    for i, column in breakers.items():
        assert all(column in rule for rule in by_record[raw_ids[i]]), by_record[raw_ids[i]]
    failing_ids = {raw_ids[i] for i in breakers}
    audit_rows = audit.to_pylist()
    assert {r[COLS.record_id] for r in audit_rows if r["verdict"] == "fail"} == failing_ids


def run_orders_flow(data_dir: Path, orders: int, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m bytewax.run flows.orders` on the embedded sample; asserts a clean exit."""
    env = {**os.environ, "THALWEG_DATA_DIR": str(data_dir), "THALWEG_SAMPLE_ORDERS": str(orders)}
    env.pop("THALWEG_BOOTSTRAP_SERVERS", None)
    out = subprocess.run(
        [sys.executable, "-m", "bytewax.run", "flows.orders", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out


@pytest.mark.slow
def test_python_m_bytewax_run_prints_the_summary(tmp_path):
    out = run_orders_flow(tmp_path, 3000)
    lines = out.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("orders: "))
    head, *body = lines[start:]
    assert head.startswith("orders: 3,000 records read in ") and "records/s)" in head, head
    warehouse = tmp_path / "warehouse"
    lines_total = sum(len(sample(i)["items"]) for i in range(3000) if i % 1000 not in (250, 500))
    assert body == [
        f"  raw lane {tmp_path / 'raw'}: 3,000 records (+3,000)",
        "  rejected: 6 (decode 3, dq 3)",
        "  audited: 2,997 (fail 3, pass 2,994)",
        f"  dlq lane {tmp_path / 'dlq'}: 6 rows (+6)",
        f"  table sales.orders (iceberg {warehouse}): 2,994 rows (+2,994)",
        f"  table sales.order_lines (iceberg {warehouse}): {lines_total:,} rows (+{lines_total:,})",
        f"  table sales.revenue_per_status_minute (iceberg {warehouse}): "
        + body[-1].rsplit(": ", 1)[1],
    ]
    assert read_table(OrdersSettings(data_dir=tmp_path), "orders").num_rows == 2_994

    # Run again: the sample replays, every lane and table already holds it.
    again = run_orders_flow(tmp_path, 3000).stdout.splitlines()
    (line,) = [line for line in again if line.startswith("orders: ")]
    assert line == (
        f"orders: nothing new (3,000 records read, all already landed); raw lane "
        f"{tmp_path / 'raw'}: 3,000 records, dlq lane {tmp_path / 'dlq'}: 6 rows, sales.orders "
        f"2,994 rows, sales.order_lines "
        f"{lines_total:,} rows, sales.revenue_per_status_minute "
        + line.rsplit("sales.revenue_per_status_minute ", 1)[1]
    )
    assert len(again) == len([x for x in again if not x.startswith("  ")])


@pytest.mark.slow
def test_importing_the_flow_starts_nothing_and_connects_nowhere(tmp_path):
    probe = textwrap.dedent(
        """
        import multiprocessing, os, socket, threading
        attempts = []
        real_connect = socket.socket.connect
        def connect(self, addr):
            attempts.append(addr)
            return real_connect(self, addr)
        socket.socket.connect = connect
        socket.socket.connect_ex = connect
        before = threading.active_count()
        import time
        import flows.orders
        assert flows.orders.flow.flow_id == "orders"
        # The SQL time bound's watchdog (armed while the contract's rules are checked)
        # is the one thread allowed, and only while it lingers: ~0.5 s once idle.
        extra = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
        assert set(extra) <= {"thalweg-sql-watchdog"}, extra
        deadline = time.monotonic() + 5
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.05)
        print(before, threading.active_count(), len(multiprocessing.active_children()), attempts)
        """
    )
    env = {
        **os.environ,
        "THALWEG_DATA_DIR": str(tmp_path / "d"),
        "THALWEG_BOOTSTRAP_SERVERS": "127.0.0.1:9",  # Kafka mode: still no connection at import
        "THALWEG_SCHEMA_REGISTRY_URL": "http://127.0.0.1:9",
    }
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["1", "1", "0", "[]"]
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("path", ["thalweg_bytewax/flows/orders.py", "flows/orders.py"])
def test_importing_the_flow_module_builds_the_flow_only_when_it_is_read(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh copy of the module, beside the one the suite shares: its import reads the
    # settings (a bad value fails there) and builds nothing; `flow`, once read, is the
    # dataflow `python -m bytewax.run` runs, built once.
    spec = importlib.util.spec_from_file_location(f"fresh_orders_{len(path)}", REPO / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its models resolve their names
    spec.loader.exec_module(module)
    assert "flow" not in vars(module)
    built = module.flow
    assert isinstance(built, Dataflow) and built.flow_id == "orders"
    assert module.flow is built
    with pytest.raises(AttributeError, match="has no attribute 'flows'"):
        module.flows  # noqa: B018 - the attribute read is the test


def test_settings_from_environment():
    s = OrdersSettings.load(
        {"THALWEG_SCHEMA_REGISTRY_URL": "mock://orders-settings", "THALWEG_DATA_DIR": "/x"}
    )
    assert s.schema_registry_url is not None
    assert s.schema_registry_url.get_secret_value() == "mock://orders-settings"
    assert s.warehouse == Path("/x/warehouse") and s.dlq_lane == Path("/x/dlq")
    assert "mock://orders-settings" in repr(s.codec())
    assert "thalweg_bytewax/flows/schemas" in repr(OrdersSettings().codec())


def test_settings_never_show_the_registry_credentials():
    url = "https://reader:hunter2-secret@registry.example:8081"
    s = OrdersSettings.load({"THALWEG_SCHEMA_REGISTRY_URL": url})
    for text in (repr(s), str(s), s.model_dump_json(), str(s.model_dump())):
        assert "hunter2-secret" not in text
    assert s.schema_registry_url is not None and s.schema_registry_url.get_secret_value() == url


def test_kafka_mode_decodes_with_the_bundled_schemas(kafka_bootstrap, make_topic, tmp_path):
    topic = make_topic()
    produce_sample_orders(kafka_bootstrap, topic, 200, partitions=[0, 1])
    produce(
        kafka_bootstrap, topic, [{"key": b"x", "value": b"\x00\x00\x00\x00\x63zz", "partition": 2}]
    )
    settings = OrdersSettings(
        bootstrap_servers=kafka_bootstrap, topic=topic, data_dir=tmp_path, tail=False
    )
    run_main(build_flow(settings))
    assert read_lane(settings.raw_lane).num_rows == 201
    assert read_table(settings, "orders").num_rows == 200
    (r,) = rejected_from_dlq_batch(read_lane(settings.dlq_lane).combine_chunks().to_batches()[0])
    assert r.locator is not None
    assert r.locator.topic == topic and r.locator.partition == 2
    assert "(unknown_schema)" in r.message and r.raw_key == b"x"


@pytest.mark.slow
def test_two_workers_fill_every_lane_exactly_once(tmp_path):
    run_orders_flow(tmp_path, N, "-w", "2")
    lanes = {name: read_lane(tmp_path / name) for name in ("raw", "dlq", "audit")}
    lanes["orders"] = read_table(OrdersSettings(data_dir=tmp_path), "orders")
    for name, table in lanes.items():
        ids = table[COLS.record_id].to_pylist()
        assert len(ids) == len(set(ids)), f"duplicate records in the {name} lane"
    bad, breakers = bad_indexes(N), contract_breakers(N)
    assert lanes["raw"].num_rows == N
    assert lanes["orders"].num_rows == N - len(bad) - len(breakers)
    assert lanes["dlq"].num_rows == len(bad) + len(breakers)
    assert lanes["audit"].num_rows == N - len(bad)


def test_decode_and_contract_rejects_of_one_partition_all_reach_the_dlq(
    kafka_bootstrap, make_topic, tmp_path
):
    # Rejects from two stages interleave by offset within one partition; every one of
    # them must land in the DLQ (a range-skipping sink fed by a merge would drop some).
    from decimal import Decimal

    from thalweg_bytewax.dev.samples import sample_orders

    orders = list(sample_orders(8, seed=11))
    values = [encode_order_avro(o) for o in orders]
    values[0] = encode_order_avro({**orders[0], "total": Decimal("-1.00")})  # contract
    values[3] = b"\x00\x00\x00\x00\x01\xff\xff"  # decode
    values[6] = encode_order_avro({**orders[6], "currency": "eur"})  # contract
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"key": b"k", "value": v, "partition": 0} for v in values])
    settings = OrdersSettings(
        bootstrap_servers=kafka_bootstrap, topic=topic, data_dir=tmp_path, tail=False
    )
    run_main(build_flow(settings))
    dlq = read_lane(settings.dlq_lane)
    assert sorted(dlq[COLS.source_offset].to_pylist()) == [0, 3, 6]
    assert sorted(dlq["reason"].to_pylist()) == ["decode", "dq", "dq"]
    assert read_table(settings, "orders").num_rows == 5


@pytest.mark.slow
def test_a_resumed_run_with_nothing_new_prints_one_line(tmp_path):
    recovery = tmp_path / "recovery"
    recovery.mkdir()
    subprocess.run(
        [sys.executable, "-m", "bytewax.recovery", str(recovery), "1"], check=True, timeout=60
    )
    lake = tmp_path / "lake"
    args = ("-r", str(recovery), "-s", "1", "-b", "0")
    first = run_orders_flow(lake, 1000, *args).stdout
    assert f"  raw lane {lake / 'raw'}: 1,000 records (+1,000)" in first
    resumed = [line for line in run_orders_flow(lake, 1000, *args).stdout.splitlines() if line]
    assert resumed == [
        f"orders: nothing new (no new records); raw lane {lake / 'raw'}: 1,000 records, "
        f"dlq lane {lake / 'dlq'}: 2 rows, sales.orders 998 rows, sales.order_lines "
        + resumed[0].split("sales.order_lines ", 1)[1]
    ]
