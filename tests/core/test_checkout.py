"""Run from a source checkout, connectors/ and operators/ import as they do installed."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from thalweg_bytewax._checkout import _CheckoutFinder, map_checkout_subpackages


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "twg_checkout_pkg").mkdir()
    (tmp_path / "twg_checkout_pkg" / "__init__.py").write_text("")
    for name in ("connectors", "operators"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"WHERE = {name!r}\n")
    (tmp_path / "connectors" / "kafka.py").write_text("SOURCE = 'kafka'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        sys, "meta_path", [f for f in sys.meta_path if not isinstance(f, _CheckoutFinder)]
    )
    yield tmp_path
    for mod in [m for m in sys.modules if m.startswith("twg_checkout_pkg")]:
        del sys.modules[mod]


def test_checkout_directories_are_mapped_into_the_package(checkout: Path) -> None:
    map_checkout_subpackages("twg_checkout_pkg", checkout / "twg_checkout_pkg")
    assert importlib.import_module("twg_checkout_pkg.operators").WHERE == "operators"
    assert importlib.import_module("twg_checkout_pkg.connectors.kafka").SOURCE == "kafka"
    map_checkout_subpackages("twg_checkout_pkg", checkout / "twg_checkout_pkg")  # idempotent
    assert sum(isinstance(f, _CheckoutFinder) for f in sys.meta_path) == 1


def test_an_installed_layout_is_left_alone(checkout: Path) -> None:
    for name in ("connectors", "operators"):
        (checkout / "twg_checkout_pkg" / name).mkdir()
    map_checkout_subpackages("twg_checkout_pkg", checkout / "twg_checkout_pkg")
    assert not any(isinstance(f, _CheckoutFinder) for f in sys.meta_path)


def test_the_real_package_imports_its_operators_and_connectors() -> None:
    import thalweg_bytewax.connectors.kafka
    import thalweg_bytewax.operators

    assert hasattr(thalweg_bytewax.operators, "decode")
    assert hasattr(thalweg_bytewax.connectors.kafka, "KafkaSource")
