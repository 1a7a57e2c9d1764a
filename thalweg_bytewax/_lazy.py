"""Package names loaded from their module on first access (PEP 562 ``__getattr__``).

A package lists ``name -> module`` and gets its ``__getattr__`` and ``__dir__`` from
:func:`lazy_package`, so importing the package does not import what a flow never uses
(the encoders, the registry client, the SDK of OpenTelemetry, ...)::

    if TYPE_CHECKING:
        from .sink import ParquetSink

    _LAZY = {"ParquetSink": ".sink"}

    __all__ = ["ParquetSink"]
    __getattr__, __dir__ = lazy_package(__name__, _LAZY, globals())

Type checkers see the names through the package's ``if TYPE_CHECKING:`` imports. The
package's ``__all__`` stays a list written out: mypy, ruff and the reference pages'
reader (griffe) read ``__all__`` only as a literal, and a computed one would hide the
names from all three.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_dir", "lazy_package", "load_lazy"]


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
