"""No two library modules import each other, not even for a type or inside a function.

The import graph is import-linter's (grimp): every ``import`` of a module of
``thalweg_bytewax``, at the top, inside a function, or under ``TYPE_CHECKING``. A cycle
is a group of modules each of which reaches the others through such imports. The
native extensions (``_record_ids``, ``contracts/_native``, ...) have no Python source,
so grimp counts ``from pkg import _native`` as an import of ``pkg``; here it is an
import of the extension module, which imports nothing of ours.

None is allowed: a partition takes its connector's configuration model, never the
connector itself, so no sink and partition module import each other.
"""

from __future__ import annotations

import ast
import importlib.machinery
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

import grimp
import pytest

PACKAGE = "thalweg_bytewax"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE


def extension_modules() -> set[str]:
    """The package's native extension modules: a stub or a built library, no source."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    found = set()
    for path in ROOT.rglob("*"):
        if path.suffix == ".pyi" and not path.with_suffix(".py").exists():
            stem = path.with_suffix("")
        elif path.name.endswith(suffixes):
            stem = path.with_name(path.name.split(".", 1)[0])
        else:
            continue
        found.add(".".join((PACKAGE, *stem.relative_to(ROOT).parts)))
    return found


def _source(module: str) -> Path:
    package = ROOT.joinpath(*module.split(".")[1:])
    return package / "__init__.py" if package.is_dir() else package.with_suffix(".py")


@cache
def _statements(path: Path) -> Mapping[int, ast.ImportFrom]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.lineno: n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}


def import_graph() -> dict[str, set[str]]:
    """Per module of the package, the modules of the package it imports."""
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    extensions = extension_modules()
    edges: dict[str, set[str]] = {m: set() for m in (*graph.modules, *extensions)}
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            if not any(e.rpartition(".")[0] == imported for e in extensions):
                edges[importer].add(imported)
                continue
            # `from pkg import name`: an extension module if `pkg.name` is one, else pkg
            statements = _statements(_source(importer))
            for detail in graph.get_import_details(importer=importer, imported=imported):
                node = statements.get(detail["line_number"])
                names = [f"{imported}.{a.name}" for a in node.names] if node else [imported]
                edges[importer].update(n if n in extensions else imported for n in names)
    return edges


def cycles(edges: Mapping[str, set[str]]) -> list[frozenset[str]]:
    """The groups of two or more modules that import each other (Tarjan's components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(start: str) -> None:
        # iterative, so a deep import chain needs no recursion limit
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(frozenset(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def _short(module: str) -> str:
    return module.removeprefix(PACKAGE + ".")


def _describe(group: frozenset[str], edges: Mapping[str, set[str]]) -> str:
    imports = sorted(f"{_short(a)} -> {_short(b)}" for a in group for b in edges[a] & group)
    return "{" + ", ".join(sorted(map(_short, group))) + "}: " + "; ".join(imports)


def test_no_library_modules_import_each_other() -> None:
    edges = import_graph()
    found = cycles(edges)
    assert found == [], "modules that import each other (move the shared name to the "
    "module that owns it, or name it by a Protocol):\n" + "\n".join(
        _describe(g, edges) for g in found
    )


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [{"a", "b"}]),
        (
            {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}},
            [{"a", "b", "c"}, {"d", "e"}],
        ),
    ],
)
def test_the_cycle_finder_finds_every_group(
    edges: dict[str, set[str]], expected: list[set[str]]
) -> None:
    assert sorted(map(sorted, cycles(edges))) == sorted(map(sorted, expected))


def test_an_extension_module_counts_as_its_own_module() -> None:
    edges = import_graph()
    assert f"{PACKAGE}.contracts._native" in extension_modules()
    assert f"{PACKAGE}.contracts._native" in edges[f"{PACKAGE}.contracts.duplicates"]
    assert f"{PACKAGE}.contracts" not in edges[f"{PACKAGE}.contracts.duplicates"]
