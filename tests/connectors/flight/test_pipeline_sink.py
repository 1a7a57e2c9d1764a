"""A pipeline's ``[sinks.<name>] kind = "flight"``: the docs' file lands each row once."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from bytewax.testing import run_main

from thalweg_bytewax.config import SecretRef
from thalweg_bytewax.connectors.flight import FlightSink, FlightSinkConfig
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.flight.table_server import TableServer
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.pipeline import FlightSinkSection, PipelineConfig
from thalweg_bytewax.pipeline._endpoints import build_sink
from thalweg_bytewax.pipeline.build import build_pipeline

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "docs" / "examples" / "pipeline_flight.toml"
TOKEN = "flight-Tok-9Zq"


def _load(server: TableServer, data: Path, *extra: str) -> PipelineConfig:
    overrides = [f"data_dir={data}", f"sinks.orders_flight.location={server.location}"]
    return PipelineConfig.load(EXAMPLE, env={}, overrides=[*overrides, *extra])


def _held(server: TableServer) -> list[bytes]:
    tables = [server.read("orders", "orders", p) for p in range(8)]
    return sorted(
        i for t in tables if t is not None for i in t.column("_twg_record_id").to_pylist()
    )


def test_the_docs_pipeline_lands_every_clean_row_once_on_the_server_across_a_rerun(
    table_server: TableServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLIGHT_TOKEN", TOKEN)
    config = _load(table_server, tmp_path / "data")
    section = config.sinks["orders_flight"]
    assert isinstance(section, FlightSinkSection)
    assert section.token == SecretRef("${env:FLIGHT_TOKEN}")
    assert TOKEN not in repr(config) and TOKEN not in config.model_dump_json()
    run_main(build_pipeline(config, base_dir=EXAMPLE.parent))
    data = tmp_path / "data"
    raw = set(read_lane(data / "raw", ["_twg_record_id"]).column(0).to_pylist())
    rejected = set(read_lane(data / "dlq", ["_twg_record_id"]).column(0).to_pylist())
    assert len(raw) == 2000  # noqa: PLR2004 - the file's `source.count`
    wanted = sorted(raw - rejected)
    assert _held(table_server) == wanted
    # The same file again, into another data directory: the sample replays every order,
    # the sink asks the server what it holds and skips it all.
    run_main(build_pipeline(_load(table_server, tmp_path / "again"), base_dir=EXAMPLE.parent))
    assert _held(table_server) == wanted
    assert table_server.rows_skipped == 0


def test_a_flight_section_builds_the_sink_its_model_describes(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        f'data_dir = "{tmp_path}"\n[sinks.out]\nkind = "flight"\nfrom = "clean"\n'
        'location = "grpc://127.0.0.1:8815"\ntarget = "orders"\nretry_for = 5\n'
    )
    config = PipelineConfig.load(path, env={})
    sink = build_sink("out", config.sinks["out"], config, tmp_path)
    assert isinstance(sink, FlightSink)
    wanted = FlightSinkConfig(
        location="grpc://127.0.0.1:8815", target="orders", retry_for=timedelta(seconds=5)
    )
    assert sink.config == wanted


@pytest.mark.parametrize(
    ("table", "refused"),
    [
        ('location = "http://x"\ntarget = "t"', "expected a Flight location"),
        ('location = "grpc://x:1"\ntarget = "t"\ncoverage = true', "`coverage` records nothing"),
        ('location = "grpc://x:1"', "target"),
    ],
)
def test_a_bad_flight_section_is_refused_at_load(tmp_path: Path, table: str, refused: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(f'[sinks.out]\nkind = "flight"\nfrom = "clean"\n{table}\n')
    with pytest.raises(ConfigError, match=refused):
        PipelineConfig.load(path, env={})


def test_an_optional_flight_sink_whose_token_is_unset_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLIGHT_TOKEN", raising=False)
    path = tmp_path / "p.toml"
    path.write_text(
        '[sinks.out]\nkind = "flight"\nfrom = "clean"\nlocation = "grpc://x:1"\n'
        'target = "t"\ntoken = "${env:FLIGHT_TOKEN}"\noptional = true\n'
    )
    config = PipelineConfig.load(path, env={})
    assert build_sink("out", config.sinks["out"], config, tmp_path) is None
    strict = config.sinks["out"].model_copy(update={"optional": False})
    with pytest.raises(ConfigError, match="FLIGHT_TOKEN"):
        build_sink("out", strict, config, tmp_path)


def test_the_pages_show_the_example_sink_as_the_file_has_it() -> None:
    text = EXAMPLE.read_text("utf-8")
    block = "```toml\n" + text[text.index("[sinks.orders_flight]") :] + "```\n"
    for page in ("pipeline.md", "connectors/flight.md"):
        assert block in (REPO / "docs" / page).read_text("utf-8"), page
