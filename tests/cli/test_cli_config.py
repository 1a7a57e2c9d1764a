"""`thalweg config validate|show|secrets` and `thalweg init`; a secret never leaves in any output."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import Field

from thalweg_bytewax.cli import main
from thalweg_bytewax.config import ConfigModel, SecretRef, Settings
from thalweg_bytewax.errors import ConfigError

ENV_SECRET = "s3cr3t-from-env-Zq9w"
FILE_SECRET = "s3cr3t-from-file-Xk7p"
MODEL = "tests.cli.test_cli_config:DemoPipeline"


class DemoPostgres(ConfigModel):
    dsn: SecretRef
    """Where the tables go: a DSN with a password reference."""
    port: int = Field(default=5432, ge=1)
    """The server's port."""


class DemoSinks(ConfigModel):
    postgres: DemoPostgres | None = None
    """The Postgres sink."""


class DemoPipeline(Settings):
    component = "demo"

    token: SecretRef | None = None
    """An API token."""
    batch_size: int = Field(default=10, ge=1)
    """Records per batch."""
    sinks: DemoSinks = DemoSinks()
    """Where records go."""


@pytest.fixture
def secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config referencing a secret in the environment and one in a file."""
    for name in [n for n in os.environ if n.startswith("THALWEG_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DEMO_PG_PASSWORD", ENV_SECRET)
    secret_file = tmp_path / "token"
    secret_file.write_text(FILE_SECRET + "\n")
    config = tmp_path / "pipeline.toml"
    config.write_text(
        f'token = "${{file:{secret_file}}}"\n'
        "[sinks.postgres]\n"
        'dsn = "postgresql://app:${env:DEMO_PG_PASSWORD}@db:5432/orders"\n'
    )
    return config


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_exits_0_or_2_naming_file_key_and_expectation(
    secrets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "config", "validate", str(secrets), "--model", MODEL)
    assert code == 0 and f"`{secrets}`: valid `demo` settings" in out
    assert "2 secret references, 0 not resolvable now" in out
    bad = secrets.with_name("bad.toml")
    bad.write_text('[sinks.postgres]\ndsn = "${env:X}"\nport = "many"\n')
    code, out, err = run(capsys, "config", "validate", str(bad), "--model", MODEL)
    assert code == 2 and not out
    assert f"`sinks.postgres.port` in `{bad}`: expected a valid integer" in err
    assert "got 'many'" in err


def test_show_prints_the_merged_config_with_references_not_values(
    secrets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "config", "show", str(secrets), "--model", MODEL, "--set", "batch_size=3"
    )
    assert code == 0
    assert "batch_size = 3" in out and "[sinks.postgres]" in out and "port = 5432" in out
    assert 'dsn = "postgresql://app:${env:DEMO_PG_PASSWORD}@db:5432/orders"' in out
    code, out, _ = run(capsys, "config", "show", str(secrets), "--model", MODEL, "--json")
    assert json.loads(out)["token"].startswith("${file:")


def test_each_call_of_main_in_one_process_sees_only_its_own_arguments(
    secrets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One process builds the parser once and parses every call with it: an option
    # given to one call (a repeated `--set`, `--json`) is not there in the next.
    for _ in range(2):
        code, out, _ = run(
            capsys,
            "config",
            "show",
            str(secrets),
            "--model",
            MODEL,
            "--set",
            "batch_size=3",
            "--set",
            "sinks.postgres.port=5433",
            "--json",
        )
        assert code == 0
        shown = json.loads(out)
        assert shown["batch_size"] == 3 and shown["sinks"]["postgres"]["port"] == 5433
        code, out, _ = run(capsys, "config", "show", str(secrets), "--model", MODEL)
        assert code == 0
        assert "\nbatch_size = 10\n" in out and "\nport = 5432\n" in out  # TOML, defaults


def test_secrets_lists_each_reference_and_whether_it_resolves(
    secrets: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run(capsys, "config", "secrets", str(secrets), "--model", MODEL)
    assert code == 0
    assert "sinks.postgres.dsn  ${env:DEMO_PG_PASSWORD}  ok" in out
    assert "token" in out and "${file:" in out
    monkeypatch.delenv("DEMO_PG_PASSWORD")
    code, out, _ = run(
        capsys, "config", "secrets", str(secrets), "--model", MODEL, "--format", "names"
    )
    assert code == 1 and out.splitlines()[0].startswith("${file:")
    assert out.splitlines()[1] == "${env:DEMO_PG_PASSWORD}"
    code, out, _ = run(
        capsys, "config", "secrets", str(secrets), "--model", MODEL, "--format", "json"
    )
    rows = {r["key"]: r for r in json.loads(out)}
    assert code == 1 and rows["sinks.postgres.dsn"]["problem"] == "variable not set or empty"
    assert rows["token"]["resolvable"] is True


def test_init_writes_a_starter_that_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pipeline.toml"
    code, out, _ = run(capsys, "init", str(path), "--model", MODEL)
    assert code == 0 and f"wrote `{path}`" in out
    text = path.read_text()
    assert "# Records per batch." in text and "environment: THALWEG_BATCH_SIZE" in text
    code, _, err = run(capsys, "init", str(path), "--model", MODEL)
    assert code == 2 and "already exists; pass `--force`" in err
    assert run(capsys, "init", str(path), "--model", MODEL, "--force")[0] == 0
    assert run(capsys, "config", "validate", str(path), "--model", MODEL)[0] == 0


def test_init_writes_a_pipeline_starter_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("THALWEG_")]:
        monkeypatch.delenv(name)
    code, out, _ = run(capsys, "init")
    assert code == 0 and "THALWEG_CONFIG=pipeline.toml thalweg run pipeline" in out
    text = (tmp_path / "pipeline.toml").read_text()
    assert "`pipeline`" in text and "[source]" in text and '# kind = "sample"' in text
    # The tables of many are there as commented examples, keys as the file spells them.
    assert "# [[sql.nodes]]" in text and "# [[windows]]" in text and "# [sinks.<name>]" in text
    assert '# from = ""  # required' in text
    code, out, _ = run(capsys, "config", "validate", "pipeline.toml")
    assert code == 0 and "valid `pipeline` settings" in out

    from thalweg_bytewax.pipeline import PipelineConfig

    assert PipelineConfig.load("pipeline.toml", env={}) == PipelineConfig.load(env={})


@pytest.mark.parametrize("kind", ["parquet", "arrow_ipc"])
def test_an_uncommented_sink_example_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "init")[0] == 0
    text = (tmp_path / "pipeline.toml").read_text()
    head, *blocks = text.split("# [sinks.<name>]")
    (block,) = [b for b in blocks if f'# kind = "{kind}"' in b]
    block = block.split("\n# [")[0]  # up to the next table
    keys = [
        line[2:].removesuffix("  # required")
        for line in block.splitlines()
        if re.match(r"# [a-z_]+ = ", line) and "(unset by default)" not in line
    ]
    (tmp_path / "p.toml").write_text(head + "[sinks.lane]\n" + "\n".join(keys) + "\n")
    extra = ["--set", "sinks.lane.from=clean", "--set", "sinks.lane.path=lane"]
    code, out, err = run(capsys, "config", "validate", "p.toml", *extra)
    assert code == 0, err
    assert f'kind = "{kind}"' in keys


def test_orders_settings_files_still_validate_as_orders_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("THALWEG_")]:
        monkeypatch.delenv(name)
    code, _, _ = run(capsys, "init", "orders.toml", "--model", "flows.orders:OrdersSettings")
    assert code == 0
    assert '# topic = "orders"' in (tmp_path / "orders.toml").read_text()
    code, out, _ = run(capsys, "config", "validate", "orders.toml")
    assert code == 0 and "valid `flows.orders` settings" in out


@pytest.mark.slow
def test_an_orders_settings_file_validates_outside_a_checkout(tmp_path: Path) -> None:
    # An installation has no top-level `flows`: the default model is the bundled flow's.
    (tmp_path / "orders.toml").write_text('topic = "payments"\nsample_orders = 10\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    env.pop("PYTHONPATH", None)
    thalweg = Path(sys.executable).with_name("thalweg")
    done = subprocess.run(
        [str(thalweg), "config", "validate", "orders.toml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "`orders.toml`: valid `flows.orders` settings" in done.stdout


def test_a_bad_model_or_override_is_a_config_error(
    secrets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "config", "show", str(secrets), "--model", "tests:nothing")
    assert code == 2 and "expected a pydantic model class at `tests:nothing`" in err
    code, _, err = run(capsys, "config", "show", str(secrets), "--model", MODEL, "--set", "x")
    assert code == 2 and "`--set x`: expected `key.path=value`" in err


def test_a_secret_never_appears_in_output_errors_reprs_or_logs(
    secrets: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []
    # Every command, with the secrets resolvable.
    for argv in (
        ["config", "validate", str(secrets)],
        ["config", "show", str(secrets)],
        ["config", "show", str(secrets), "--json"],
        ["config", "secrets", str(secrets)],
        ["config", "secrets", str(secrets), "--format", "json"],
        ["config", "secrets", str(secrets), "--format", "names"],
        ["init", str(tmp_path / "starter.toml")],
    ):
        code, out, err = run(capsys, *argv, "--model", MODEL)
        assert code == 0, err
        seen += [out, err]
    # Every error path: secrets given as values in each layer, next to a bad value.
    literal = secrets.with_name("literal.toml")
    literal.write_text(f'token = "{FILE_SECRET}"\nbatch_size = 0\n')
    env_literal = {"THALWEG_SINKS__POSTGRES__DSN": f"postgresql://app:{ENV_SECRET}@db/x"}
    for env, argv in (
        ({}, ["config", "validate", str(literal)]),
        (env_literal, ["config", "validate", str(literal)]),
        ({}, ["config", "show", str(secrets), "--set", f"token={ENV_SECRET}${{"]),
        ({}, ["config", "show", str(secrets), "--set", f"token=${{evn:{ENV_SECRET}}}"]),
        ({}, ["config", "show", str(secrets), "--set", "batch_size=0"]),
        ({"THALWEG_TOKEN": ENV_SECRET, "THALWEG_BATCH_SIZE": "-1"}, ["config", "show"]),
        ({}, ["config", "validate", str(secrets.with_name("missing.toml"))]),
    ):
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            code, out, err = run(capsys, *argv, "--model", MODEL)
        assert code == 2, (argv, out)
        seen += [out, err]
    # The loaded model, every way it can be printed, and resolution failures.
    config = DemoPipeline.load(file=secrets)
    assert config.token is not None and config.token.resolve() == FILE_SECRET
    assert config.sinks.postgres is not None
    assert ENV_SECRET in config.sinks.postgres.dsn.resolve()
    seen += [repr(config), str(config), config.model_dump_json(), str(config.model_dump())]
    seen += [repr(config.token), str(config.sinks.postgres.dsn)]
    for bad_env in ({"THALWEG_TOKEN": ENV_SECRET, "THALWEG_BATCH_SIZE": "x"},):
        with pytest.raises(ConfigError) as info:
            DemoPipeline.load(bad_env)
        seen += [str(info.value), repr(info.value), repr(info.value.__context__)]
    monkeypatch.delenv("DEMO_PG_PASSWORD")
    with pytest.raises(ConfigError) as info:
        config.sinks.postgres.dsn.resolve()
    seen += [str(info.value), repr(info.value.__cause__), repr(info.value.__context__)]
    seen += [r.getMessage() for r in caplog.records]
    text = "\n".join(seen)
    assert "thalweg: " in text and "settings" in text  # the error paths did run
    assert ENV_SECRET not in text
    assert FILE_SECRET not in text


def test_the_orders_registry_url_takes_a_reference_resolved_when_the_codec_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.orders import OrdersSettings

    config = tmp_path / "orders.toml"
    config.write_text('schema_registry_url = "mock://reader:${env:DEMO_REG_PW}@orders-ref"\n')
    monkeypatch.setenv("DEMO_REG_PW", ENV_SECRET)
    code, out, _ = run(capsys, "config", "secrets", str(config))
    assert code == 0 and "schema_registry_url  ${env:DEMO_REG_PW}  ok" in out
    code, out, _ = run(capsys, "config", "show", str(config))
    assert "${env:DEMO_REG_PW}" in out and ENV_SECRET not in out
    settings = OrdersSettings.load({}, file=config)
    assert settings.schema_registry_url is not None
    assert settings.schema_registry_url.resolve() == f"mock://reader:{ENV_SECRET}@orders-ref"
    assert ENV_SECRET not in repr(settings)
