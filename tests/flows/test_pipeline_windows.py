"""Sliding and session windows in a pipeline file land what the Python API lands."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import run_main

import thalweg_bytewax.operators as twg
from flows.pipeline import build_pipeline
from thalweg_bytewax.codecs import AvroCodec
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig, IcebergSink
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.dev._orders_sample import SampleOrdersSource
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.operators.sql_dag import sql_dag
from thalweg_bytewax.pipeline import PipelineConfig
from thalweg_bytewax.pipeline.build import SAMPLE_SCHEMAS
from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS
from thalweg_bytewax.registry import DirectorySchemaSource
from thalweg_bytewax.sql.dag import SqlDag
from thalweg_bytewax.windows.aggregate import WindowSpec

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"
N = 1_500
QUERY = "SELECT order_id, created_at, status, total FROM input"
AGGS = {"revenue": ("sum", "total"), "orders": ("count", "*"), "largest": ("max", "total")}

# The window of docs/examples/windows_<kind>.toml through the Python API, and its lateness.
WINDOWS: dict[str, tuple[WindowSpec, timedelta]] = {
    "tumbling": (twg.Tumbling(timedelta(seconds=60)), timedelta(seconds=10)),
    "sliding": (twg.Sliding(timedelta(seconds=60), timedelta(seconds=20)), timedelta(seconds=600)),
    "session": (twg.Session(timedelta(seconds=0.5)), timedelta(0)),
}


def _example(kind: str) -> Path:
    return EXAMPLES / f"windows_{kind}.toml"


def _load(kind: str, data: Path, *extra: str) -> PipelineConfig:
    overrides = [f"data_dir={data}", f"source.count={N}", *extra]
    return PipelineConfig.load(_example(kind), env={}, overrides=overrides)


def _write(tmp_path: Path, window: str) -> Path:
    """docs/examples/windows_tumbling.toml with its window's sizing keys replaced."""
    text = _example("tumbling").read_text("utf-8")
    text = text.replace('kind = "tumbling"\nsize = 60\nallowed_lateness = 10', window)
    file = tmp_path / "pipeline.toml"
    file.write_text(text, encoding="utf-8")
    return file


def _python_api_flow(config: PipelineConfig) -> Dataflow:
    """The flow of the file written with the operators: sample, decode, dedup, SQL, window."""
    (w,) = config.windows
    data = config.data_dir
    reader = (SAMPLE_SCHEMAS / "1.avsc").read_text("utf-8")
    codec = AvroCodec(DirectorySchemaSource(SAMPLE_SCHEMAS), reader_schema=reader)
    flow = Dataflow(config.name)
    source = SampleOrdersSource(N, topic="orders", partitions=4, batch_size=2_000, seed=7)
    raw = op.input(f"{config.name}_in", flow, source)
    decoded = twg.decode("decode", raw, codec, metadata="locator")
    op.output("dlq_decode", decoded.rejected, ParquetSink(data / "dlq" / "decode"))
    clean = twg.dedup("dedup", decoded.ok, by="record_id", window=timedelta(hours=1))
    raw_schema = DEFAULT_COLUMNS.raw_schema
    located = (raw_schema.field(c) for c in DEFAULT_COLUMNS.policy_columns("locator"))
    schema = pa.schema([*codec.arrow_schema, *located])
    out = sql_dag("transform", clean, SqlDag([{"name": "orders", "query": QUERY}]), schema=schema)
    window, lateness = WINDOWS[w.kind]
    result = twg.window_agg(
        "revenue",
        out["orders"],
        window=window,
        aggs=AGGS,
        group_by=("status",),
        time_column="created_at",
        allowed_lateness=lateness,
    )
    catalog = IcebergCatalogConfig(warehouse=str(data / "warehouse"))
    table = getattr(config.sinks["ice_revenue"], "table", "")
    windows = IcebergSink(
        catalog, table, mode="upsert", key_columns=["status", "window_start"], locators="absent"
    )
    op.output("ice_revenue", result.windows, windows)
    late = IcebergSink(
        catalog,
        f"{table}_late",
        mode="upsert",
        key_columns=["status", "source", "late_seq"],
        locators="absent",
    )
    op.output("ice_late", result.late, late)
    return flow


def _rows(config: PipelineConfig, sink: str) -> list[dict]:
    catalog = IcebergCatalogConfig(warehouse=str(config.data_dir / "warehouse")).load()
    table = getattr(config.sinks[sink], "table", "")
    if not catalog.table_exists(table):
        return []
    rows = catalog.load_table(table).scan().to_arrow()
    keep = sorted(n for n in rows.column_names if n != "_twg_emit_ts")  # stamped at commit
    return sorted(rows.select(keep).to_pylist(), key=repr)


def _rows_in(lane: Path) -> int:
    return read_lane(lane).num_rows if lane.exists() else 0


@pytest.mark.heavy
@pytest.mark.parametrize("kind", sorted(WINDOWS))
def test_a_pipeline_window_lands_the_rows_the_python_api_lands(tmp_path, kind):
    piped = _load(kind, tmp_path / "pipeline")
    direct = _load(kind, tmp_path / "direct")
    assert piped.windows[0].kind == kind and piped.windows[0].spec() == WINDOWS[kind][0]
    run_main(build_pipeline(piped, base_dir=EXAMPLES))
    run_main(_python_api_flow(direct))

    windows, late = _rows(piped, "ice_revenue"), _rows(piped, "ice_late")
    assert len(windows) > 10, windows
    assert windows == _rows(direct, "ice_revenue")
    assert late == _rows(direct, "ice_late")
    counted = sum(w["orders"] for w in windows) + sum(r["late_records"] for r in late)
    decoded = N - _rows_in(tmp_path / "pipeline" / "dlq")
    if kind == "sliding":  # a 60 s window every 20 s holds each order three times
        assert counted == 3 * decoded and not late
    else:  # a tumbling window or a session holds each order once (or it is late)
        assert counted == decoded
    if kind == "session":  # no lateness allowed: the sample's interleaved partitions are late
        assert late


@pytest.mark.slow
def test_python_m_bytewax_run_runs_the_session_example(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    env |= {
        "THALWEG_CONFIG": str(_example("session")),
        "THALWEG_DATA_DIR": str(tmp_path),
        "THALWEG_SOURCE__COUNT": "600",
        # `python -m bytewax.run flows.pipeline` finds the example in the checkout.
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "bytewax.run", "flows.pipeline"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "windows_session: 600 records read" in done.stdout, done.stdout
    assert "table windows.order_bursts (iceberg" in done.stdout, done.stdout


def test_tumbling_is_the_default_kind(tmp_path):
    (window,) = PipelineConfig.load(_write(tmp_path, "size = 60"), env={}).windows
    assert window.kind == "tumbling" and window.spec() == twg.Tumbling(timedelta(minutes=1))


@pytest.mark.parametrize(
    ("keys", "named"),
    [
        ('kind = "sliding"\nlength = 60\nstep = 90', r"`step` <= `length` \(60 seconds\); got 90 seconds"),
        ('kind = "sliding"\nlength = "PT1M"\nstep = "PT90S"', r"`step` <= `length` \(60 seconds\); got 90 seconds"),
        ('kind = "sliding"\nlength = 60', r"\(sliding\): expected `step` \(a duration > 0"),
        ('kind = "session"\ngap = 0', r"\(session\): expected `gap` > 0 seconds; got 0 seconds"),
        ('kind = "session"\ngap = -2', r"`gap` > 0 seconds; got -2 seconds"),
        ('kind = "session"\nsize = 60', r"`size` is for tumbling windows; a session window expected `gap`"),
        ('kind = "hopping"\nsize = 60', r"`kind` expected one of \['tumbling', 'sliding', 'session'\]; got 'hopping'"),
        ("", r"\(tumbling\): expected `size`"),
        ('size = 60\nallowed_lateness = -1', r"`allowed_lateness` >= 0 seconds; got -1 seconds"),
    ],
)  # fmt: skip
def test_an_invalid_window_fails_at_load_naming_the_key(tmp_path, keys, named):
    file = _write(tmp_path, keys)
    with pytest.raises(ConfigError, match=named) as caught:
        PipelineConfig.load(file, env={})
    assert "pipeline window `revenue`" in str(caught.value)
    assert str(file) in str(caught.value)


def _bad(tmp_path: Path, old: str, new: str) -> Path:
    text = _write(tmp_path, "size = 60").read_text("utf-8")
    assert old in text
    (tmp_path / "bad.toml").write_text(text.replace(old, new), encoding="utf-8")
    return tmp_path / "bad.toml"


def test_an_unknown_aggregate_function_fails_at_load(tmp_path):
    bad = _bad(tmp_path, 'largest = ["max", "total"]', 'distinct = ["count_distinct", "status"]')
    with pytest.raises(ConfigError, match=r"window `revenue`.*aggregate `distinct`.*distinct"):
        PipelineConfig.load(bad, env={})


def test_a_sink_reading_the_late_report_of_an_unknown_window_is_refused(tmp_path):
    bad = _bad(tmp_path, '"revenue.late"', '"nope.late"')
    with pytest.raises(ConfigError, match=r"sink `ice_late`.*'revenue.late'.*got 'nope.late'"):
        PipelineConfig.load(bad, env={})


def test_a_parquet_sink_reading_a_window_is_refused_at_load(tmp_path):
    late = 'kind = "iceberg"\nfrom = "revenue.late"\ntable = "windows.revenue_per_minute_late"'
    bad = _bad(tmp_path, late, 'kind = "parquet"\nfrom = "revenue.late"\npath = "late"')
    # A Parquet lane has no mode or key: the upsert keys of the table it replaces go too.
    text = bad.read_text("utf-8").split("\n")
    at = text.index('path = "late"')
    while at + 1 < len(text) and text[at + 1].startswith(("mode", "key_columns")):
        del text[at + 1]
    bad.write_text("\n".join(text), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"sink `ice_late` \(parquet\).*no source locator"):
        PipelineConfig.load(bad, env={})


def test_the_pipeline_page_shows_each_example_file_as_it_is():
    page = (REPO / "docs" / "pipeline.md").read_text("utf-8")
    for kind in WINDOWS:
        body = _example(kind).read_text("utf-8").split("\n\n[[windows]]\n", 1)[1]
        window = "[[windows]]\n" + body.split("\n\n", 1)[0]
        assert window in page, kind
        assert f"(examples/windows_{kind}.toml)" in page
