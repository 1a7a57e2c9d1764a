"""A package's public names, written once as re-exports, read alike at run time and by the docs.

These packages write each public name as ``from .module import Name as Name`` (under
``if TYPE_CHECKING:`` for a name loaded on first access) and no ``__all__``;
``thalweg_bytewax._lazy`` reads the names and their modules from those imports when the
package is imported, and the reference pages' reader (griffe) gets them through
``.ci/griffe_reexports.py``. Without
that extension the pages would list none of the names, and ``mkdocs build --strict``
would not say so.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import griffe
import pytest

from thalweg_bytewax._lazy import reexports

ROOT = Path(__file__).resolve().parents[1]

PACKAGE_ROOT = ROOT / "thalweg_bytewax"

# Every package that gets its __all__ from its re-exports (either helper of _lazy).
REEXPORTING = sorted(
    ".".join(init.parent.relative_to(ROOT).parts)
    for init in PACKAGE_ROOT.rglob("__init__.py")
    if "_reexports(globals()" in init.read_text(encoding="utf-8")
)


def test_the_packages_are_found() -> None:
    assert {"thalweg_bytewax.catalog", "thalweg_bytewax.connectors.kafka"} <= set(REEXPORTING)


def test_only_the_explicit_re_exports_count() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "import typing\n"
        "from .top import Eager as Eager\n"
        "from .plain import Used\n"
        "if TYPE_CHECKING:\n"
        "    from .sink import Sink as Sink\n"
        "    from .config import Config as Config, Hint\n"
        "    from ..other import Renamed as Alias\n"
        "    from thalweg_bytewax.errors import ConfigError as ConfigError\n"
        "if typing.TYPE_CHECKING:\n"
        "    from .stats import Stats as Stats\n"
        "def f() -> None:\n"
        "    if TYPE_CHECKING:\n"
        "        from .inner import Inner as Inner\n"
    )
    assert reexports(tree) == {
        "Eager": ".top",
        "Sink": ".sink",
        "Config": ".config",
        "ConfigError": "thalweg_bytewax.errors",
        "Stats": ".stats",
    }


@pytest.mark.parametrize("package", REEXPORTING)
def test_the_package_writes_no_all_and_sets_it_from_its_re_exports(package: str) -> None:
    module = importlib.import_module(package)
    tree = ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8"))
    assigned = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    assert "__all__" not in assigned, f"{package} writes an __all__ beside its re-exports"
    assert module.__all__ == sorted(reexports(tree))


@pytest.mark.parametrize("package", REEXPORTING)
def test_the_reference_reader_lists_the_names_the_package_exports(package: str) -> None:
    extensions = griffe.load_extensions(str(ROOT / ".ci" / "griffe_reexports.py") + ":ReExports")
    path = Path(importlib.import_module(package).__file__ or "")
    read = griffe.visit(package, path, path.read_text(encoding="utf-8"), extensions=extensions)
    public = sorted(n for n, m in read.members.items() if m.is_public and not m.is_special)
    assert public == importlib.import_module(package).__all__
