"""Imports from a source checkout: ``connectors/`` and ``operators/`` mapped in.

An installed package holds ``thalweg_bytewax/connectors`` and ``thalweg_bytewax/
operators`` (pyproject maps the repository's top-level directories there). Run from
the root of a checkout — ``python -m bytewax.run flows.orders`` puts the working
directory first on ``sys.path`` — Python imports this package from the checkout
instead, where the two directories sit next to it: this finder maps them in the same
way, so the flow imports what an installation would.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

_MAPPED = ("connectors", "operators")


class _CheckoutFinder(importlib.abc.MetaPathFinder):
    def __init__(self, package: str, directories: dict[str, Path]) -> None:
        self._package = package
        self._directories = directories

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        prefix, _, name = fullname.rpartition(".")
        directory = self._directories.get(name) if prefix == self._package else None
        if directory is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, directory / "__init__.py", submodule_search_locations=[str(directory)]
        )


def map_checkout_subpackages(package: str, package_dir: Path) -> None:
    """Map the checkout's ``connectors/`` and ``operators/`` into ``package``.

    Does nothing in an installation (the directories are inside the package) or when
    the checkout directories are missing.
    """
    if all((package_dir / name).is_dir() for name in _MAPPED):
        return
    root = package_dir.parent
    directories = {n: root / n for n in _MAPPED if (root / n / "__init__.py").is_file()}
    if len(directories) != len(_MAPPED):
        return
    if not any(isinstance(f, _CheckoutFinder) for f in sys.meta_path):
        sys.meta_path.append(_CheckoutFinder(package, directories))
