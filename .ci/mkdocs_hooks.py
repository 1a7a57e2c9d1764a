"""MkDocs hook: the API reference sees the package as it is installed.

``connectors/`` and ``operators/`` are installed as ``thalweg_bytewax.connectors`` and
``thalweg_bytewax.operators`` ([tool.setuptools.package-dir] in pyproject.toml), but
mkdocstrings reads the source statically (griffe), and a static reader finds them only
inside ``thalweg_bytewax/``. Before each build, this hook lays out a temporary
``thalweg_bytewax/``: a copy of its ``__init__.py``, a symlink to every other entry of
``thalweg_bytewax/`` and to the two mapped directories, and puts it first in the Python
handler's ``paths`` (as ``.ci/typecheck`` does for mypy). A new module needs no change
here; concurrent builds do not share the tree.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "thalweg_bytewax"
MAPPED = {name: ROOT / PACKAGE / name for name in ("connectors", "operators")}

_tree: tempfile.TemporaryDirectory[str] | None = None


def _lay_out(tree: Path) -> None:
    """Lay out ``tree/thalweg_bytewax`` as the package is installed."""
    package = tree / PACKAGE
    package.mkdir()
    for entry in sorted((ROOT / PACKAGE).iterdir()):
        if entry.name == "__init__.py":
            # A copy: griffe resolves symlinks, and looks for submodules next to the
            # resolved ``__init__.py``.
            shutil.copyfile(entry, package / entry.name)
        elif entry.name != "__pycache__" and entry.name not in MAPPED:
            (package / entry.name).symlink_to(entry)
    for name, directory in MAPPED.items():
        (package / name).symlink_to(directory, target_is_directory=True)


@event_priority(100)  # before mkdocstrings' own on_config, which makes the handler
def on_config(config: Any) -> Any:
    """Lay out the tree and put it first in the Python handler's search paths."""
    global _tree  # one tree per build, removed with the next build or at exit
    _tree = tempfile.TemporaryDirectory(prefix="thalweg-apidocs-")
    _lay_out(Path(_tree.name))
    handler = config["plugins"]["mkdocstrings"].config["handlers"].setdefault("python", {})
    handler["paths"] = [_tree.name, *handler.get("paths", [])]
    return config
