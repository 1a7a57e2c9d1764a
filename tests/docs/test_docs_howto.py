"""The how-to guides under docs/how-to work as written: each runs its example and checks what landed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.fixtures.crash import CrashHarness
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.testing import produce_sample_orders

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs/examples"
THALWEG = str(Path(sys.executable).with_name("thalweg"))


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without THALWEG_* settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    return {**env, **extra}


def run(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command from the repository's root (so `docs.examples.*` imports)."""
    return subprocess.run(
        list(args), env=env, cwd=ROOT, capture_output=True, text=True, check=check, timeout=300
    )


@pytest.mark.slow
def test_kafka_topic_into_iceberg_and_postgres_ends_by_itself(
    kafka_bootstrap: str, make_topic: Callable[[], str], tmp_path: Path, pg_dsn: str
) -> None:
    """docs/examples/howto_kafka_to_tables.py (docs/how-to/kafka-to-tables.md)."""
    topic = make_topic()
    produce_sample_orders(kafka_bootstrap, topic, 300)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS sales CASCADE")
    env = clean_env(
        THALWEG_BOOTSTRAP_SERVERS=kafka_bootstrap,
        THALWEG_TOPICS=topic,
        THALWEG_DATA_DIR=str(tmp_path / "lake"),
        THALWEG_POSTGRES_DSN=pg_dsn,
    )
    try:
        out = run(sys.executable, str(EXAMPLES / "howto_kafka_to_tables.py"), env=env)
        assert out.stdout.splitlines() == [
            "raw lane: 300 records",
            "dlq lane: 0 records",
            "iceberg sales.orders: 300 rows",
            "postgres sales.orders: 300 rows",
        ]
        again = run(sys.executable, str(EXAMPLES / "howto_kafka_to_tables.py"), env=env)
        assert again.stdout == out.stdout  # a second bounded run lands nothing twice
        with psycopg.connect(pg_dsn) as conn:
            row = conn.execute("SELECT count(DISTINCT order_id) FROM sales.orders").fetchone()
        assert row == (300,)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS sales CASCADE")


@pytest.mark.slow
def test_contract_sends_each_bad_payment_to_the_dlq_with_its_reason_and_rule(
    tmp_path: Path,
) -> None:
    """docs/examples/howto_contract.py with docs/examples/howto_payments.odcs.yaml."""
    out = run(sys.executable, str(EXAMPLES / "howto_contract.py"), str(tmp_path), env=clean_env())
    assert out.stdout.splitlines() == [
        "clean: ['p-1', 'p-8']",
        "dlq: offset 1 dq method_allowed_values",
        "dlq: offset 2 dq amount_range",
        "dlq: offset 3 dq currency_pattern",
        "dlq: offset 4 dq refunds_have_no_card_fee",
        "dlq: offset 5 decode -",
        "dlq: offset 6 decode -",
        "dlq by reason: [('decode', 2), ('dq', 4)]",
        "audit: [('fail', 4), ('pass', 2)]",
    ]


@pytest.mark.slow
def test_sql_then_tumbling_windows_upsert_revenue_per_minute(tmp_path: Path) -> None:
    """docs/examples/howto_sql_windows.py (docs/how-to/sql-and-windows.md)."""
    out = run(
        sys.executable, str(EXAMPLES / "howto_sql_windows.py"), str(tmp_path), env=clean_env()
    )
    # 2 partitions x 150 orders, one every 2 s: 5 minutes; 3 in 4 are paid (113 a partition).
    assert out.stdout.splitlines() == [
        "10 windows, 226 paid orders",
        "12:00 EUR orders=24 revenue_eur=240.0",
        "12:00 USD orders=22 revenue_eur=110.0",
        "12:01 EUR orders=24 revenue_eur=240.0",
        "12:01 USD orders=20 revenue_eur=100.0",
    ]
    paid = read_lane(tmp_path / "paid")
    assert paid.num_rows == 226


@pytest.mark.slow
def test_init_writes_a_valid_starter_and_the_edited_pipeline_runs(tmp_path: Path) -> None:
    """`thalweg init`, then docs/examples/howto_pipeline.toml (docs/how-to/pipeline-from-toml.md)."""
    starter = tmp_path / "pipeline.toml"
    run(THALWEG, "init", str(starter), env=clean_env())
    assert '# kind = "sample"' in starter.read_text()
    run(THALWEG, "config", "validate", str(starter), env=clean_env())
    edited = EXAMPLES / "howto_pipeline.toml"
    run(THALWEG, "config", "validate", str(edited), env=clean_env())
    data = tmp_path / "data"
    env = clean_env(THALWEG_CONFIG=str(edited), THALWEG_DATA_DIR=str(data))
    out = run(THALWEG, "run", "pipeline", env=env)  # as the page runs it
    assert f"raw lane {data}/raw: 400 records (+400)" in out.stdout
    big = read_lane(data / "big_orders")
    assert 0 < big.num_rows < 400
    assert min(big.column("total").to_pylist()) >= 100
    assert f"table shop.big_orders (iceberg {data}/warehouse): {big.num_rows} rows" in out.stdout


@pytest.mark.slow
def test_coverage_shows_the_gap_and_recover_fills_it_once(
    kafka_bootstrap: str, make_topic: Callable[[], str], tmp_path: Path
) -> None:
    """docs/examples/howto_recover.py (docs/how-to/recover-a-sink.md)."""
    topic = make_topic()
    lake, recovery = tmp_path / "lake", tmp_path / "recovery"
    recovery.mkdir()
    env = clean_env(
        THALWEG_BOOTSTRAP_SERVERS=kafka_bootstrap,
        THALWEG_TOPICS=topic,
        THALWEG_DATA_DIR=str(lake),
    )
    flow = [sys.executable, "-m", "bytewax.run", "docs.examples.howto_recover"]
    flow += ["-r", str(recovery), "-s", "1", "-b", "0"]
    run(sys.executable, "-m", "bytewax.recovery", str(recovery), "1", env=env)
    produce_sample_orders(kafka_bootstrap, topic, 200, partitions=[0, 1, 2, 3])
    run(*flow, env=env)
    produce_sample_orders(kafka_bootstrap, topic, 200, partitions=[0, 1, 2, 3], start=200)
    run(*flow, env={**env, "THALWEG_ORDERS": "0"})  # the orders lane is out of the flow
    produce_sample_orders(kafka_bootstrap, topic, 100, partitions=[0, 1, 2, 3], start=400)
    run(*flow, env=env)

    coverage = [THALWEG, "coverage", str(lake / "raw"), "--raw-lane", "recover_example.raw_lane"]
    before = run(*coverage, env=env).stdout.splitlines()
    for p in range(4):
        assert (
            f"recover_example.orders_lane  {topic}:{p}  covers 0..49, 100..124; 1 gaps; "
            "50 offsets behind the raw lane" in before
        )
        assert "    gap 50..99 (50 offsets)" in before
        assert f"recover_example.raw_lane  {topic}:{p}  covers 0..124; no gaps" in before

    recover = [THALWEG, "recover", "docs.examples.howto_recover", "--sink", "orders_lane"]
    out = run(*recover, "--no-progress", env=env)
    assert (
        out.stdout.splitlines()[-1] == "sink `recover_example.orders_lane`: recovered 200 offsets"
    )
    after = run(*coverage, env=env).stdout
    assert after.count("no gaps; 0 offsets behind the raw lane") == 4
    orders = read_lane(lake / "orders")
    assert orders.num_rows == 500
    assert len(set(orders.column("order_id").to_pylist())) == 500
    assert "nothing to recover" in run(*recover, "--no-progress", env=env).stdout


@pytest.mark.slow
def test_two_workers_land_every_record_and_the_endpoints_count_them(
    kafka_bootstrap: str, make_topic: Callable[[], str], tmp_path: Path
) -> None:
    """docs/examples/howto_scale_observe.py (docs/how-to/scale-and-observe.md)."""
    topic = make_topic()
    produce_sample_orders(kafka_bootstrap, topic, 400)
    env = clean_env(
        THALWEG_BOOTSTRAP_SERVERS=kafka_bootstrap,
        THALWEG_TOPICS=topic,
        THALWEG_DATA_DIR=str(tmp_path / "lake"),
    )
    out = run(sys.executable, str(EXAMPLES / "howto_scale_observe.py"), env=env)
    lines = out.stdout.splitlines()
    assert lines[:3] == [
        "ready: True",
        "orders_lane: 400 rows written by 4 shards",
        "raw_lane: 400 rows written by 4 shards",
    ]
    assert lines[3].startswith("thalweg_step_records_in_total{")
    assert 'step_id="scale_observe.decode"' in lines[3] and lines[3].endswith(" 400.0")
    assert read_lane(tmp_path / "lake" / "orders").num_rows == 400
    # The module as the guide runs it, on two workers, into another lake.
    env["THALWEG_DATA_DIR"] = str(tmp_path / "lake2")
    run(
        sys.executable, "-m", "bytewax.run", "docs.examples.howto_scale_observe", "-w", "2", env=env
    )
    for lane in ("raw", "orders"):
        table = read_lane(tmp_path / "lake2" / lane)
        assert table.num_rows == 400
        assert len(set(table.column("_twg_record_id").to_pylist())) == 400


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault",
    ["epoch_sink.mid_write:3", "epoch_sink.before_commit:3", "epoch_sink.after_commit:3"],
)
def test_custom_sink_killed_and_resumed_holds_each_row_once(
    crash: CrashHarness, fault: str
) -> None:
    """docs/examples/howto_custom_sink.py (docs/how-to/custom-sink.md)."""
    out_dir, recovery = crash.root / "out", crash.root / "recovery"
    recovery.mkdir()
    init = [sys.executable, "-m", "bytewax.recovery", str(recovery), "1"]
    crash.command(init, timeout_s=300, clean=True).finishes()
    script = [sys.executable, str(EXAMPLES / "howto_custom_sink.py"), str(out_dir), str(recovery)]
    example = crash.command(script, timeout_s=300, clean=True)
    example.killed_at(fault)  # SIGKILLed at the third time it reached the point
    published = sorted(p.name for p in out_dir.glob("*/*/*.csv"))
    assert published  # some epochs made it before the kill
    resumed = example.finishes()
    assert resumed.stdout.splitlines() == ["200 rows, 200 distinct (partition, offset)"]


@pytest.mark.slow
def test_wasm_functions_map_and_query_and_a_trapping_row_goes_to_the_dlq() -> None:
    """docs/examples/howto_wasm_udf.py (docs/how-to/wasm-udf.md)."""
    out = run(sys.executable, str(EXAMPLES / "howto_wasm_udf.py"), env=clean_env())
    lines = out.stdout.splitlines()
    assert lines == [
        "ok: offset 0 fahrenheit=32.0 each=5 per_slot=3",
        "ok: offset 1 fahrenheit=70.7 each=3 per_slot=2",
        "ok: offset 2 fahrenheit=212.0 each=2 per_slot=1",
        "ok: offset 4 fahrenheit=98.60000000000001 each=3 per_slot=2",
        "dlq: offset 3 udf trapped: wasm trap: integer divide by zero on row 0 of its input; "
        "fix the function",
    ]
    # The guide shows the output as it is.
    guide = (ROOT / "docs/how-to/wasm-udf.md").read_text()
    assert "\n".join(lines) in guide


EXPECTED_FLIGHT = "200 rows scored and landed, 200 distinct locators, 0 dead-lettered, mean score 6.40"


@pytest.mark.slow
def test_flight_sidecar_scores_every_row_once_in_process_and_served_by_the_cli() -> None:
    """docs/examples/howto_flight_sidecar.py (docs/how-to/flight-sidecar.md), both ways."""
    script = str(EXAMPLES / "howto_flight_sidecar.py")
    assert run(sys.executable, script, env=clean_env()).stdout.strip() == EXPECTED_FLIGHT
    serve = [THALWEG, "sidecar", "serve", "docs.examples.howto_flight_sidecar:score"]
    proc = subprocess.Popen(
        [*serve, "--port", "0"], cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        location = proc.stdout.readline().split(" at ")[1].strip()
        done = run(sys.executable, script, "--sidecar", location, env=clean_env())
        assert done.stdout.strip() == EXPECTED_FLIGHT
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
