"""The pipeline of ``thalweg_bytewax/flows/orders.toml`` lands what ``flows.orders`` lands, row for row."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pyarrow as pa
import pytest
from bytewax.testing import run_main

from flows.orders import OrdersSettings, build_flow
from flows.pipeline import build_pipeline, load_pipeline
from tests.connectors.kafka.kafka_sink_helpers import read_topic
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.pipeline import PipelineConfig
from thalweg_bytewax.pipeline._summary import RunReport

REPO = Path(__file__).resolve().parents[2]
ORDERS_TOML = REPO / "thalweg_bytewax" / "flows" / "orders.toml"
N = 3_000
# Stamped when a record is read or landed: they differ between any two runs.
STAMPS = ("_twg_ingest_ts", "_twg_emit_ts", "rejected_at", "evaluated_at")
TABLES = ("orders", "order_lines", "revenue_per_status_minute")


def _canonical(table: pa.Table) -> list[dict]:
    keep = [n for n in table.column_names if not any(n.endswith(s) for s in STAMPS)]
    rows = table.select(keep).to_pylist()
    return sorted(rows, key=repr)


def _tables(data_dir: Path) -> dict[str, list[dict]]:
    catalog = IcebergCatalogConfig(warehouse=str(data_dir / "warehouse")).load()
    return {t: _canonical(catalog.load_table(f"sales.{t}").scan().to_arrow()) for t in TABLES}


def _lanes(data_dir: Path) -> dict[str, list[dict]]:
    return {lane: _canonical(read_lane(data_dir / lane)) for lane in ("raw", "dlq", "audit")}


@pytest.mark.heavy
def test_orders_toml_lands_the_same_lanes_and_tables_as_flows_orders(tmp_path):
    direct, piped = tmp_path / "direct", tmp_path / "pipeline"
    run_main(build_flow(OrdersSettings(data_dir=direct, sample_orders=N)))
    config = PipelineConfig.load(
        ORDERS_TOML, env={}, overrides=[f"data_dir={piped}", f"source.count={N}"]
    )
    run_main(build_pipeline(config, base_dir=ORDERS_TOML.parent))

    lanes, tables = _lanes(direct), _tables(direct)
    assert len(lanes["raw"]) == N and len(tables["orders"]) > N * 0.99
    assert len(tables["revenue_per_status_minute"]) > 0
    assert _lanes(piped) == lanes
    assert _tables(piped) == tables
    rules = sorted(p.name for p in (direct / "rules").iterdir())
    assert sorted(p.name for p in (piped / "rules").iterdir()) == rules


def test_orders_toml_is_the_orders_settings_at_their_defaults():
    config = PipelineConfig.load(ORDERS_TOML, env={})
    settings = OrdersSettings().pipeline()
    base = ORDERS_TOML.parent
    assert config.codec.schema_dir and config.codec.reader_schema and config.contract.path
    # The file names resources relative to itself; the settings hold absolute paths.
    assert str(base / config.codec.schema_dir) == settings.codec.schema_dir
    assert str(base / config.codec.reader_schema) == settings.codec.reader_schema
    assert str(base / config.contract.path) == settings.contract.path
    same = {"codec": {"schema_dir", "reader_schema"}, "contract": {"path"}}
    assert config.model_dump(exclude=same) == settings.model_dump(exclude=same)


def test_load_pipeline_reads_thalweg_config_relative_to_the_file(monkeypatch, tmp_path):
    monkeypatch.setenv("THALWEG_CONFIG", str(ORDERS_TOML))
    config, base = load_pipeline()
    assert config.name == "orders" and base == ORDERS_TOML.parent


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("sinks.x.kind=iceberg", "sinks"),
        ("source.kind=kafka", "source.brokers"),
        ("source.kind=files", "source.paths"),
    ],
)
def test_bad_wiring_is_refused_at_load_naming_the_key(override, named):
    with pytest.raises(ConfigError, match=named.split(".")[-1]):
        PipelineConfig.load(ORDERS_TOML, env={}, overrides=[override])


def test_a_sink_reading_an_unknown_stream_is_refused():
    extra = ["sinks.x.kind=parquet", "sinks.x.from=nowhere", "sinks.x.path=lane"]
    with pytest.raises(ConfigError, match="`x`.*nowhere"):
        PipelineConfig.load(ORDERS_TOML, env={}, overrides=extra)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    # `python -m bytewax.run flows.pipeline` finds the example in the checkout.
    return {**env, "PYTHONPATH": str(REPO), **extra}


@pytest.mark.slow
def test_python_m_bytewax_run_flows_pipeline_runs_the_file(tmp_path):
    env = _env(
        THALWEG_CONFIG=str(ORDERS_TOML),
        THALWEG_DATA_DIR=str(tmp_path / "data"),
        THALWEG_SOURCE__COUNT="800",
    )
    done = subprocess.run(
        [sys.executable, "-m", "bytewax.run", "flows.pipeline"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "orders" in done.stdout and "sales.orders" in done.stdout, done.stdout
    assert read_lane(tmp_path / "data" / "raw").num_rows == 800


@pytest.mark.slow
def test_importing_flows_pipeline_for_kafka_starts_nothing_and_connects_nowhere(tmp_path):
    code = textwrap.dedent(
        """
        import socket, threading, time
        def refuse(*a, **k):
            raise AssertionError("network at import")
        socket.socket.connect = refuse
        import flows.pipeline
        # The SQL time bound's watchdog (armed while the contract's rules are checked)
        # is the one thread allowed, and only while it lingers: ~0.5 s once idle.
        extra = {t.name for t in threading.enumerate() if t is not threading.main_thread()}
        assert extra <= {"thalweg-sql-watchdog"}, extra
        deadline = time.monotonic() + 5
        while threading.active_count() > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() == 1, threading.enumerate()
        print(flows.pipeline.flow.flow_id)
        """
    )
    env = _env(
        THALWEG_CONFIG=str(ORDERS_TOML),
        THALWEG_DATA_DIR=str(tmp_path),
        THALWEG_SOURCE__KIND="kafka",
        THALWEG_SOURCE__BROKERS="127.0.0.1:1",
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "orders"
    assert not any(tmp_path.iterdir()), "import wrote to the data directory"


@pytest.mark.heavy
def test_an_avro_codec_without_a_reader_schema_decodes_by_writer_schema(tmp_path):
    # Writer schemas only (a schema directory standing in for a registry): the contract's
    # schema stands in for the payload's when the SQL DAG is checked at build time.
    for name in ("schemas", "contracts"):
        (tmp_path / name).symlink_to(ORDERS_TOML.parent / name)
    text = ORDERS_TOML.read_text().replace('reader_schema = "schemas/1.avsc"\n', "")
    (tmp_path / "orders.toml").write_text(text)
    config = PipelineConfig.load(
        tmp_path / "orders.toml", env={}, overrides=[f"data_dir={tmp_path / 'data'}", "source.count=600"]
    )
    assert config.codec.reader_schema is None
    run_main(build_pipeline(config, base_dir=tmp_path))
    tables = _tables(tmp_path / "data")
    assert len(read_lane(tmp_path / "data" / "raw")) == 600
    assert 590 < len(tables["orders"]) <= 600
    assert len(tables["order_lines"]) >= len(tables["orders"])


@pytest.mark.heavy
def test_a_kafka_sink_in_a_pipeline_file_writes_each_order_once_as_json(
    tmp_path, kafka_bootstrap, make_topic
):
    topic, bootstrap = make_topic(), kafka_bootstrap
    data = tmp_path / "data"
    extra = [
        f"data_dir={data}",
        "source.count=500",
        "sinks.out.kind=kafka",
        "sinks.out.from=orders",
        f"sinks.out.brokers={bootstrap}",
        f"sinks.out.topic={topic}",
        "sinks.out.encoder=json",
        "sinks.out.key=order_id",
        "sinks.out.shards=2",
    ]
    config = PipelineConfig.load(ORDERS_TOML, env={}, overrides=extra)
    report = RunReport("orders", data / "raw", (), at_exit=False)
    run_main(build_pipeline(config, base_dir=ORDERS_TOML.parent, summary=report))
    table = _tables(data)["orders"]
    out = read_topic(bootstrap, topic)
    lines = report.lines()
    assert f"  topic {topic} (kafka): {len(out):,} rows (+{len(out):,})" in lines, lines
    assert len(out) == len(table) > 490
    values = [orjson.loads(r.value or b"null") for r in out]
    assert sorted(v["order_id"] for v in values) == sorted(r["order_id"] for r in table)
    assert all(r.key == v["order_id"].encode() for r, v in zip(out, values, strict=True))
    # A second run over the same input writes nothing more: each order once.
    run_main(build_pipeline(config, base_dir=ORDERS_TOML.parent))
    assert len(read_topic(bootstrap, topic)) == len(out)
    # It records its coverage beside the raw lane as the table sinks do.
    from thalweg_bytewax.coverage.store import SqliteCoverageStore

    entries = SqliteCoverageStore(data / "raw").entries()
    stored = {(e.topic, e.partition): e.coverage for e in entries if e.sink == "orders.out"}
    ice = {(e.topic, e.partition): e.coverage for e in entries if e.sink == "orders.ice_orders"}
    assert stored and stored == ice


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["sinks.k.encoder=avro"], "registry"),
        (["sinks.k.encoder=json", "sinks.k.from=revenue"], "window stream"),
        ([], "encoder"),
    ],
)
def test_kafka_sink_sections_are_checked_at_load(extra, named):
    base = [
        "sinks.k.kind=kafka",
        "sinks.k.from=orders",
        "sinks.k.brokers=localhost:9092",
        "sinks.k.topic=out",
    ]
    with pytest.raises(ConfigError, match=named):
        PipelineConfig.load(ORDERS_TOML, env={}, overrides=[*base, *extra])


def test_a_kafka_source_section_passes_its_prefetch_budget():
    from thalweg_bytewax.connectors.kafka import KafkaSource
    from thalweg_bytewax.pipeline.build import pipeline_source

    extra = [
        "source.kind=kafka",
        "source.brokers=localhost:9",
        "source.topics=[\"orders\"]",
        "source.prefetch_budget=1048576",
    ]
    config = PipelineConfig.load(ORDERS_TOML, env={}, overrides=extra)
    source = pipeline_source(config)
    assert isinstance(source, KafkaSource)
    assert source.prefetch_budget == 1_048_576
    default = pipeline_source(PipelineConfig.load(ORDERS_TOML, env={}, overrides=extra[:3]))
    assert isinstance(default, KafkaSource)
    assert default.prefetch_budget == 256 * 1024 * 1024
