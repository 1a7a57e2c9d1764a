"""The dependency direction of the layout holds: core <- connectors, operators <- pipeline, cli.

import-linter cannot see `connectors/` and `operators/` as `thalweg_bytewax` subpackages
(they are mapped into the namespace at install time), so the layer contract is checked
here over the source files with `ast`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    package = installed_package(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level and package:
                # `from ..x import y` climbs level - 1 packages above the module's own.
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                found.add(base + ("." + node.module if node.module else ""))
            elif node.module:
                found.add(node.module)
    return found


def installed_package(path: Path) -> str:
    """The package a source file is installed in, e.g. `thalweg_bytewax.connectors.kafka`."""
    parts = path.relative_to(ROOT).parent.parts
    if parts and parts[0] in ("connectors", "operators"):
        return ".".join(("thalweg_bytewax", *parts))
    return ".".join(parts)


def starts(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


PACKAGE = ROOT / "thalweg_bytewax"
# Above connectors and operators: the pipeline compiler and its run summary, the sample
# sources of development, the bundled flows, the command line.
PIPELINE = [
    PACKAGE / "pipeline" / "build.py",
    PACKAGE / "pipeline" / "_endpoints.py",
    PACKAGE / "pipeline" / "_summary.py",
]
ABOVE = ("cli", "dev", "flows")
CORE = [
    p
    for p in PACKAGE.rglob("*.py")
    if "runtime" not in p.parts
    and p.relative_to(PACKAGE).parts[0] not in ABOVE
    and p not in PIPELINE
]
LAYERS = [
    *[
        (p, ("bytewax", "thalweg_bytewax.connectors", "thalweg_bytewax.operators", "flows"))
        for p in CORE
    ],
    *[
        (p, ("thalweg_bytewax.operators", "flows", "thalweg_bytewax.cli"))
        for p in (ROOT / "connectors").rglob("*.py")
    ],
    *[
        (p, ("thalweg_bytewax.connectors", "flows", "thalweg_bytewax.cli"))
        for p in (ROOT / "operators").rglob("*.py")
    ],
    *[
        (p, ("thalweg_bytewax.connectors", "thalweg_bytewax.operators", "flows"))
        for p in (ROOT / "thalweg_bytewax" / "runtime").rglob("*.py")
    ],
    # Nothing inside the package imports the checkout's `flows/` examples (an installation
    # has none); the compiler and the samples do not import the flows built on them.
    *[
        (p, ("flows", "thalweg_bytewax.flows", "thalweg_bytewax.cli"))
        for p in [*PIPELINE, *(PACKAGE / "dev").rglob("*.py")]
    ],
    *[(p, ("flows", "thalweg_bytewax.cli")) for p in (PACKAGE / "flows").rglob("*.py")],
    *[(p, ("flows",)) for p in (PACKAGE / "cli").rglob("*.py")],
]


@pytest.mark.parametrize(
    ("path", "forbidden"), LAYERS, ids=[str(p.relative_to(ROOT)) for p, _ in LAYERS]
)
def test_module_respects_the_layers(path: Path, forbidden: tuple[str, ...]) -> None:
    bad = sorted(m for m in imported_modules(path) if starts(m, forbidden))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}, which its layer must not"


def test_every_source_module_is_checked() -> None:
    # Subpackages (connectors/kafka/, ...) are layered like their parents.
    checked = {p for p, _ in LAYERS}
    sources = [
        *(ROOT / "connectors").rglob("*.py"),
        *(ROOT / "operators").rglob("*.py"),
        *(ROOT / "thalweg_bytewax").rglob("*.py"),
    ]
    missing = sorted(str(p.relative_to(ROOT)) for p in sources if p not in checked)
    assert not missing, f"not checked by the layer test: {missing}"
    assert ROOT / "connectors" / "kafka" / "source.py" in checked


def test_relative_imports_resolve_to_installed_names() -> None:
    found = imported_modules(ROOT / "connectors" / "kafka" / "source.py")
    assert "thalweg_bytewax.connectors.kafka._config" in found
    assert installed_package(ROOT / "connectors" / "kafka" / "_watch.py") == (
        "thalweg_bytewax.connectors.kafka"
    )
