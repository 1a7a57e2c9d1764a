"""The ``>>>`` examples in the library's docstrings run, and show what they print.

Every module of the package (``connectors`` and ``operators`` are installed under it) is
imported and its examples run through ``doctest``. An example that needs a live outside
service is marked ``# doctest: +SKIP``; every other one must pass.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

import thalweg_bytewax
import thalweg_bytewax.connectors
import thalweg_bytewax.operators

ROOTS: tuple[ModuleType, ...] = (
    thalweg_bytewax,
    thalweg_bytewax.connectors,
    thalweg_bytewax.operators,
)
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _module_names() -> list[str]:
    names = {root.__name__ for root in ROOTS}
    for root in ROOTS:
        names |= {m.name for m in pkgutil.walk_packages(root.__path__, f"{root.__name__}.")}
    return sorted(names)


def _with_examples() -> list[str]:
    finder = doctest.DocTestFinder()
    return [
        name
        for name in _module_names()
        if any(t.examples for t in finder.find(importlib.import_module(name)))
    ]


MODULES = _with_examples()


def test_the_docstring_examples_are_found() -> None:
    # A walk that found nothing would make every other test here vacuous.
    assert "thalweg_bytewax.codecs.json" in MODULES and len(MODULES) >= 8, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=OPTIONS, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
