"""Package names loaded from their module on first access (PEP 562 ``__getattr__``).

A package names each public name once, as an explicit re-export (``from M import Name
as Name``), and gets its ``__all__`` from those imports. The names it loads on first
access are re-exported under ``if TYPE_CHECKING:``, and :func:`lazy_reexports` gives
it ``__getattr__`` and ``__dir__`` over them, so importing the package does not import
what a flow never uses (the encoders, the registry client, the SDK of OpenTelemetry,
...)::

    if TYPE_CHECKING:
        from .config import ParquetSinkConfig as ParquetSinkConfig
        from .sink import ParquetSink as ParquetSink

    __getattr__, __dir__ = lazy_reexports(globals())

A package that imports its names when it is imported re-exports them at its top level
and calls :func:`export_reexports` once, at its end, for its ``__all__``.

``from M import Name as Name`` is the re-export every reader already understands: type
checkers (mypy strict, with no implicit re-export) and ruff see the names and their
types there. At run time :func:`reexports` reads the same imports from the package's
source: they give each name's module, and the package's ``__all__`` (so ``dir()`` and
``import *`` list every name before it is loaded). The reference pages' reader (griffe)
gets the same list from the same function, through the site's extension
``.ci/griffe_reexports.py``. No ``__all__`` is written in such a package: mypy, ruff and
griffe read ``__all__`` only as a literal, and a second list would have to be kept
equal to the first by hand.

A package whose names are not all of that form (names defined in it, names warned
about after a move) lists ``name -> module`` itself and binds :func:`lazy_package`.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "export_reexports",
    "lazy_dir",
    "lazy_package",
    "lazy_reexports",
    "load_lazy",
    "reexports",
]


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
    """Name -> module of each explicit re-export, ``from M import Name as Name``, of a module.

    The imports at the module's top level and in its top-level ``if TYPE_CHECKING:``
    blocks count, and only those whose alias is the name itself (the re-export of the
    typing specification); other imports serve the module's own code or annotations.
    A relative module keeps its dots (``from .sink import X as X`` gives ``".sink"``).
    """
    homes: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            statements = node.body
        else:
            statements = [node]
        for statement in statements:
            if isinstance(statement, ast.ImportFrom):
                module = "." * statement.level + (statement.module or "")
                homes.update((a.name, module) for a in statement.names if a.asname == a.name)
    return homes


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


def export_reexports(namespace: dict[str, Any]) -> dict[str, str]:
    """Set a package's ``__all__`` to the names it re-exports; return each name's module.

    The names are read from the package's own source (:func:`reexports`) and sorted.
    A name the package defines itself is not one of them: such a package writes its
    ``__all__`` out.

    Args:
        namespace: The package's ``globals()``; ``__all__`` is set there.

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
    return homes


def lazy_reexports(
    namespace: dict[str, Any],
    *,
    before: Callable[[str], None] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` over the names it re-exports.

    Sets the package's ``__all__`` (:func:`export_reexports`); a name re-exported
    under ``if TYPE_CHECKING:`` is loaded from its module on first access.

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
    homes = export_reexports(namespace)
    return lazy_package(namespace["__name__"], homes, namespace, before=before)
