"""Package names loaded from their module on first access (PEP 562 ``__getattr__``).

A package names each public name once, as an explicit re-export under ``if
TYPE_CHECKING:``, and gets its ``__getattr__``, ``__dir__`` and ``__all__`` from
:func:`lazy_reexports`, so importing the package does not import what a flow never
uses (the encoders, the registry client, the SDK of OpenTelemetry, ...)::

    if TYPE_CHECKING:
        from .config import ParquetSinkConfig as ParquetSinkConfig
        from .sink import ParquetSink as ParquetSink

    __getattr__, __dir__ = lazy_reexports(globals())

``from M import Name as Name`` is the re-export every reader already understands:
type checkers (mypy strict, with no implicit re-export) and ruff see the names and
their types there. At run time :func:`reexports` reads the same imports from the
package's source: they give each name's module, and the package's ``__all__`` is set
from them (so ``dir()`` and ``import *`` list every name before it is loaded). The
reference pages' reader (griffe) gets the same list from the same function, through
the site's extension ``.ci/griffe_reexports.py``. No ``__all__`` is written in such a
package: mypy, ruff and griffe read ``__all__`` only as a literal, and a second list
would have to be kept equal to the first by hand.

A package whose names are not all of that form (names defined in it, names warned
about after a move) lists ``name -> module`` itself and binds :func:`lazy_package`.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_dir", "lazy_package", "lazy_reexports", "load_lazy", "reexports"]


def load_lazy(
    package: str,
    homes: Mapping[str, str],
    namespace: dict[str, Any],
    name: str,
    *,
    before: Callable[[str], None] | None = None,
) -> Any:
    """The value of ``name`` from its module in ``homes``, kept in ``namespace`` after.

    Args:
        package: The package's ``__name__`` (modules may be relative to it: ``.sink``).
        homes: Public name -> the module that defines it.
        namespace: The package's ``globals()``; the loaded value is stored there, so
            the next access does not come back here.
        name: The attribute asked for.
        before: Called with the module's name before it is imported (e.g. to require
            an optional extra with a message saying which).

    Raises:
        AttributeError: ``name`` is not one of the package's lazy names.
    """
    module = homes.get(name)
    if module is None:
        msg = f"module {package!r} has no attribute {name!r}"
        raise AttributeError(msg)
    if before is not None:
        before(module)
    value = getattr(importlib.import_module(module, package), name)
    namespace[name] = value
    return value


def lazy_dir(namespace: Mapping[str, Any]) -> list[str]:
    """A lazy package's ``dir()``: what it holds now and every public name."""
    return sorted(set(namespace) | set(namespace.get("__all__", ())))


def lazy_package(
    package: str,
    homes: Mapping[str, str],
    namespace: dict[str, Any],
    *,
    before: Callable[[str], None] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module ``__getattr__`` and ``__dir__`` over its lazy names.

    Args:
        package: The package's ``__name__`` (modules may be relative to it: ``.sink``).
        homes: Public name -> the module that defines it.
        namespace: The package's ``globals()``, where each loaded value is kept.
        before: Called with a module's name before it is imported (see
            :func:`load_lazy`).

    Returns:
        ``(__getattr__, __dir__)``, to bind at the package's top level.
    """

    def __getattr__(name: str) -> Any:
        """Load a public name from its module on first access."""
        return load_lazy(package, homes, namespace, name, before=before)

    def __dir__() -> list[str]:
        return lazy_dir(namespace)

    return __getattr__, __dir__


def reexports(tree: ast.Module) -> dict[str, str]:
    """Name -> module of each ``from M import Name as Name`` under ``if TYPE_CHECKING:``.

    Only the blocks at the module's top level count, and only imports whose alias is
    the name itself (the explicit re-export of the typing specification); other
    imports there serve annotations only. A relative module keeps its dots
    (``from .sink import X as X`` gives ``".sink"``).
    """
    homes: dict[str, str] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom):
                module = "." * statement.level + (statement.module or "")
                homes.update((a.name, module) for a in statement.names if a.asname == a.name)
    return homes


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


def lazy_reexports(
    namespace: dict[str, Any],
    *,
    before: Callable[[str], None] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` over the names it re-exports for type checkers.

    The names and their modules are read from the package's own source
    (:func:`reexports`); the package's ``__all__`` is set to the names, sorted.

    Args:
        namespace: The package's ``globals()``; ``__all__`` is set there and each
            loaded value kept there.
        before: Called with a module's name before it is imported (see
            :func:`load_lazy`).

    Returns:
        ``(__getattr__, __dir__)``, to bind at the package's top level.

    Raises:
        ImportError: The package's source cannot be read (its names are listed there).
    """
    package: str = namespace["__name__"]
    source = namespace["__loader__"].get_source(package)
    if source is None:
        msg = f"{package}: its public names are read from its source, which is not installed"
        raise ImportError(msg)
    homes = reexports(ast.parse(source))
    namespace["__all__"] = sorted(homes)
    return lazy_package(package, homes, namespace, before=before)
