"""Configuration layers: TOML file < `THALWEG_*` variables < `--set`, and errors naming the place."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field

from thalweg_bytewax.config import ConfigModel, SecretRef, Settings, load_config, render_starter
from thalweg_bytewax.errors import ConfigError


class Postgres(ConfigModel):
    dsn: SecretRef
    """Where the tables go."""
    port: int = Field(default=5432, ge=1)
    """The server's port."""


class Iceberg(ConfigModel):
    warehouse: str = "thalweg-data/warehouse"
    """The warehouse directory."""


class Sinks(ConfigModel):
    postgres: Postgres | None = None
    """The Postgres sink (unset: none)."""
    iceberg: Iceberg = Iceberg()
    """The Iceberg sink."""


class Pipeline(Settings):
    component = "pipeline"

    topics: list[str] = Field(default_factory=lambda: ["orders"], min_length=1)
    """Topics to read."""
    batch_size: int = Field(default=10, ge=1)
    """Records per batch."""
    sinks: Sinks = Sinks()
    """Where the records go."""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipeline.toml"
    path.write_text(text)
    return path


def test_file_then_variables_then_overrides_win_key_by_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'topics = ["a"]\nbatch_size = 5\n[sinks.postgres]\ndsn = "${env:PG}"\nport = 1\n'
        '[sinks.iceberg]\nwarehouse = "/w"\n',
    )
    env = {"THALWEG_BATCH_SIZE": "6", "THALWEG_SINKS__POSTGRES__PORT": "2", "THALWEG_X": "y"}
    p = Pipeline.load(env, file=path, overrides=["sinks.postgres.port=3", "topics=b, c"])
    assert p.topics == ["b", "c"] and p.batch_size == 6
    assert p.sinks.postgres is not None and p.sinks.postgres.port == 3
    assert p.sinks.iceberg.warehouse == "/w"  # a table merges: untouched keys stay
    assert p.sinks.postgres.dsn == SecretRef("${env:PG}")


def test_thalweg_config_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "batch_size = 7\n")
    assert Pipeline.load({"THALWEG_CONFIG": str(path)}).batch_size == 7
    assert load_config(Pipeline, env={"THALWEG_CONFIG": str(path)}).batch_size == 7
    assert Pipeline.load({}).batch_size == 10


def test_an_invalid_file_value_fails_at_load_naming_the_file_and_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, '[sinks.postgres]\ndsn = "${env:PG}"\nport = "x"\n')
    with pytest.raises(ConfigError) as info:
        Pipeline.load({}, file=path)
    text = str(info.value)
    assert text.startswith("`pipeline` settings: `sinks.postgres.port` in `")
    assert f"in `{path}`: expected a valid integer" in text and "got 'x'" in text
    assert not text.endswith(".")


def test_each_layer_is_named_as_the_source_of_its_bad_value(tmp_path: Path) -> None:
    path = write(tmp_path, "batch_size = 0\n")
    with pytest.raises(ConfigError) as info:
        Pipeline.load({"THALWEG_SINKS__ICEBERG__WAREHOUS": "/w"}, file=path)
    text = str(info.value)
    assert f"`batch_size` in `{path}`: expected greater than or equal to 1; got 0" in text
    assert "`THALWEG_SINKS__ICEBERG__WAREHOUS`: unknown key; expected one of `warehouse`" in text
    with pytest.raises(ConfigError, match=r"`--set batch_size`: expected a valid integer"):
        Pipeline.load({}, file=path, overrides=["batch_size=ten"])
    with pytest.raises(ConfigError, match=r"`--set nope`: expected `key.path=value`"):
        Pipeline.load({}, overrides=["nope"])


def test_unknown_and_missing_keys_in_a_file(tmp_path: Path) -> None:
    path = write(tmp_path, "bach_size = 3\n[sinks.postgres]\nport = 1\n")
    with pytest.raises(ConfigError) as info:
        Pipeline.load({}, file=path)
    text = str(info.value)
    assert f"`bach_size` in `{path}`: unknown key; expected one of `topics`, `batch_size`" in text
    assert f"`sinks.postgres.dsn` is required; add it to `{path}` or set " in text
    assert "`THALWEG_SINKS__POSTGRES__DSN`" in text


def test_a_file_that_is_missing_or_not_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file `.*nope.toml`: cannot read it"):
        Pipeline.load({}, file=tmp_path / "nope.toml")
    path = write(tmp_path, "batch_size = 3\ntopics = [\n")
    with pytest.raises(ConfigError, match=r"config file `.*`: expected TOML; got .*line|end"):
        Pipeline.load({}, file=path)


def test_a_reference_in_a_plain_setting_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[sinks.iceberg]\nwarehouse = "${env:WAREHOUSE}"\n')
    with pytest.raises(ConfigError) as info:
        Pipeline.load({}, file=path)
    text = str(info.value)
    assert f"`sinks.iceberg.warehouse` in `{path}`: expected a plain value" in text
    assert "got the reference `${env:WAREHOUSE}`" in text
    # `$${` is a literal `${` in a secret; elsewhere a `${` that is no reference is text.
    loaded = Pipeline.load({}, overrides=["sinks.iceberg.warehouse=/a${b"])
    assert loaded.sinks.iceberg.warehouse == "/a${b"


@given(
    st.one_of(st.none(), st.integers(1, 99)),
    st.one_of(st.none(), st.integers(1, 99)),
    st.one_of(st.none(), st.integers(1, 99)),
)
def test_the_last_layer_that_sets_a_key_wins(
    from_file: int | None, from_env: int | None, from_cli: int | None
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.toml"
        path.write_text("" if from_file is None else f"[sinks.postgres]\nport = {from_file}\n")
        env = {"THALWEG_SINKS__POSTGRES__DSN": "${env:PG}"}
        if from_env is not None:
            env["THALWEG_SINKS__POSTGRES__PORT"] = str(from_env)
        cli = [] if from_cli is None else [f"sinks.postgres.port={from_cli}"]
        p = Pipeline.load(env, file=path, overrides=cli)
    wanted = next((v for v in (from_cli, from_env, from_file) if v is not None), 5432)
    assert p.sinks.postgres is not None and p.sinks.postgres.port == wanted


def test_secret_references_resolve_only_when_asked(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    ref = SecretRef(f"postgresql://app:${{env:PG}}@db/x?k=${{file:{secret}}}&d=$${{x}}")
    assert [str(r) for r in ref.references] == ["${env:PG}", f"${{file:{secret}}}"]
    assert ref.resolve({"PG": "from-env"}) == "postgresql://app:from-env@db/x?k=from-file&d=${x}"
    assert "from-" not in repr(ref) + str(ref)
    assert pickle.loads(pickle.dumps(ref)) == ref
    with pytest.raises(ConfigError, match=r"`\$\{env:PG\}`: the variable `PG` is not set"):
        ref.resolve({})
    secret.unlink()
    with pytest.raises(ConfigError, match=r"cannot read `.*pw` \(No such file"):
        ref.resolve({"PG": "from-env"})


def test_a_secret_given_as_a_value_is_never_shown() -> None:
    assert repr(SecretRef("hunter2")) == "SecretRef('***')"
    shown = str(SecretRef("postgresql://app:hunter2@${env:HOST}/db"))
    assert "hunter2" not in shown and "${env:HOST}" in shown
    p = Pipeline.load({"THALWEG_SINKS__POSTGRES__DSN": "hunter2"})
    for text in (repr(p), str(p), p.model_dump_json(), str(p.model_dump())):
        assert "hunter2" not in text
    assert p.sinks.postgres is not None and p.sinks.postgres.dsn.resolve() == "hunter2"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("${evn:X}", "expected a reference of kind `env` or `file`; got `evn`"),
        ("${env:NOT A NAME}", "expected a variable name in `${env:…}`"),
        ("${file:relative/pw}", "expected an absolute path in `${file:…}`"),
        ("abc${", "expected `${env:NAME}` or `${file:/path}` after `${`"),
    ],
)
def test_a_malformed_reference_is_refused_by_key(value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        Pipeline.load({"THALWEG_SINKS__POSTGRES__DSN": value})
    text = str(info.value)
    assert "`THALWEG_SINKS__POSTGRES__DSN`: " + expected in text
    with pytest.raises(ConfigError, match="secret setting: expected"):
        SecretRef(value)


def test_the_starter_loads_to_the_defaults_commented_or_not(tmp_path: Path) -> None:
    text = render_starter(Pipeline, title="pipeline")
    assert "# Records per batch." in text and "# batch_size = 10" in text
    assert "# [sinks.postgres]" in text and "environment: THALWEG_SINKS__POSTGRES__PORT" in text
    path = write(tmp_path, text)
    assert Pipeline.load({}, file=path) == Pipeline()
    # Uncommenting a default line changes nothing until its value is edited.
    lines = text.splitlines()
    live = [ln[2:] if ln.startswith("# ") and " = " in ln and "(unset" not in ln else ln
            for ln in lines if not ln.startswith("# [") and not ln.startswith("# dsn")]
    live = [ln for ln in live if not ln.startswith("port = ")]  # inside the unset section
    path.write_text("\n".join(live))
    assert Pipeline.load({}, file=path) == Pipeline()


class Window(ConfigModel):
    name: str
    size_s: float = Field(gt=0)
    source: str = Field(default="orders", alias="from")


class Sink(ConfigModel):
    dsn: SecretRef | None = None
    shards: int = 1


class Tables(Settings):
    component = "tables"

    windows: list[Window] = Field(default_factory=list)
    sinks: dict[str, Sink] = Field(default_factory=dict)


def test_errors_inside_lists_and_tables_name_the_item_and_show_no_secret(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        '[[windows]]\nname = "a"\nsize_s = 60\n'
        '[[windows]]\nname = "b"\nsize_s = "x"\n'
        '[sinks.pg]\ndsn = "postgresql://u:hunter2pw@db/x"\nshards = "many"\nbogus = 1\n'
        "[sinks.other]\ndsn = 12345\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(Tables, file=path, env={})
    text = str(info.value)
    assert f"`windows[1].size_s` in `{path}`: expected a valid number" in text
    assert "got 'x'" in text
    assert f"`sinks.pg.shards` in `{path}`: expected a valid integer" in text
    assert "got 'many'" in text
    assert "`sinks.pg.bogus`" in text and "expected one of `dsn`, `shards`" in text
    assert "`sinks.other.dsn`" in text and "got a value of type int" in text
    assert "hunter2pw" not in text
    assert "12345" not in text


def test_a_missing_key_of_a_list_item_is_named_by_index(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[[windows]]\nsize_s = 60\n[[windows]]\nname = "b"\nsize_s = 0\nfro = "x"\n')
    with pytest.raises(ConfigError) as info:
        load_config(Tables, file=path, env={})
    text = str(info.value)
    assert f"`windows[0].name` is required; add it to `{path}`" in text
    assert "`windows[1].size_s`" in text and "greater than 0" in text
    assert f"`windows[1].fro` in `{path}`: unknown key; expected one of `name`, `size_s`, `from`" in (
        text
    )
