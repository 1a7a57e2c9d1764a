"""Every flow reads one settings pattern: a `Settings` model loaded from `THALWEG_*`."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from thalweg_bytewax.config import Settings
from thalweg_bytewax.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
FLOWS = {
    "thalweg_bytewax.flows.orders": "OrdersSettings",
    "flows.raw_lane": "RawLaneSettings",
    "flows.dedup_lane": "DedupLaneSettings",
}
KAFKA = {"THALWEG_BOOTSTRAP_SERVERS": "127.0.0.1:9", "THALWEG_TOPICS": "orders"}


def settings_class(module: str) -> type[Settings]:
    env = {**os.environ, **KAFKA}
    old = dict(os.environ)
    os.environ.update(env)
    try:
        mod = importlib.import_module(module)
    finally:
        os.environ.clear()
        os.environ.update(old)
    cls = getattr(mod, FLOWS[module])
    assert isinstance(cls, type) and issubclass(cls, Settings)
    return cls


@pytest.mark.parametrize("module", sorted(FLOWS))
def test_each_flow_documents_exactly_the_variables_it_reads(module: str) -> None:
    cls = settings_class(module)
    doc = sys.modules[module].__doc__ or ""
    documented = set(re.findall(r"^\| ``(THALWEG_[A-Z0-9_]+)``", doc, flags=re.MULTILINE))
    assert documented == {cls.env_name(name) for name in cls.model_fields}


def test_the_brokers_have_one_name_everywhere() -> None:
    for module in FLOWS:
        cls = settings_class(module)
        if "bootstrap_servers" in cls.model_fields or module != "flows.dedup_lane":
            assert cls.env_name("bootstrap_servers") == "THALWEG_BOOTSTRAP_SERVERS"
    bundled = REPO.glob("thalweg_bytewax/flows/*.py")
    for path in [*REPO.glob("flows/*.py"), *bundled, *REPO.glob("docs/examples/*.py"), REPO / "README.md"]:
        text = path.read_text()
        for stale in ("THALWEG_BROKERS", "KAFKA_BOOTSTRAP", "THALWEG_LAKE", "LANE_PATH"):
            assert stale not in text, f"{path.name} still names {stale}"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "env", "variable"),
    [
        ("flows.dedup_lane", {"THALWEG_SHARDS": "many"}, "THALWEG_SHARDS"),
        ("flows.dedup_lane", {"THALWEG_RETRY_RATE": "2"}, "THALWEG_RETRY_RATE"),
        ("flows.raw_lane", {**KAFKA, "THALWEG_BATCH_SIZE": "1e3x"}, "THALWEG_BATCH_SIZE"),
        ("flows.raw_lane", {"THALWEG_TOPICS": "orders"}, "THALWEG_BOOTSTRAP_SERVERS"),
        ("thalweg_bytewax.flows.orders", {"THALWEG_SAMPLE_ORDERS": "0"}, "THALWEG_SAMPLE_ORDERS"),
        ("thalweg_bytewax.flows.orders", {"THALWEG_TAIL": "sometimes"}, "THALWEG_TAIL"),
    ],
)
def test_importing_a_flow_with_a_bad_value_raises_config_error_naming_it(
    module: str, env: dict[str, str], variable: str
) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    probe = (
        "import importlib, sys\n"
        "from thalweg_bytewax.errors import ConfigError\n"
        "try:\n"
        f"    importlib.import_module({module!r})\n"
        "except ConfigError as exc:\n"
        "    print('ConfigError', exc)\n"
        "    sys.exit(3)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 3, out.stderr[-2000:]
    component = settings_class(module).component  # the module a user runs
    assert out.stdout.startswith(f"ConfigError `{component}` settings: `{variable}`"), out.stdout


def test_raw_lane_reads_topics_as_a_list() -> None:
    # Imported with the brokers set, as any test of this file may run first on its worker.
    RawLaneSettings = settings_class("flows.raw_lane")  # noqa: N806 - a class

    s = RawLaneSettings.load({**KAFKA, "THALWEG_TOPICS": "a, b,,c", "THALWEG_TAIL": "0"})
    assert getattr(s, "topics") == ["a", "b", "c"] and getattr(s, "tail") is False  # noqa: B009
    with pytest.raises(ConfigError, match="`THALWEG_TOPICS` is required"):
        RawLaneSettings.load({"THALWEG_BOOTSTRAP_SERVERS": "b:1"})
