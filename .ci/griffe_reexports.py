"""Griffe extension: a package's public names are the names it re-exports.

A package that gets its ``__all__`` from ``thalweg_bytewax._lazy`` writes none: each
public name is an explicit re-export, ``from .sink import X as X`` (under ``if
TYPE_CHECKING:`` for a name loaded on first access), and the package sets its
``__all__`` from those imports when it is imported. Griffe reads sources without
running them, so this extension gives such a module the same ``__all__`` (its
``exports``), read by the same function, and the reference pages list exactly the
names ``import *`` and ``dir()`` give.
"""

from __future__ import annotations

import ast
from typing import Any

import griffe

from thalweg_bytewax._lazy import reexports


class ReExports(griffe.Extension):
    """Set a module's exports from its re-exports when it writes no ``__all__``."""

    def on_module_members(
        self,
        *,
        node: ast.AST | griffe.ObjectNode,
        mod: griffe.Module,
        **kwargs: Any,  # noqa: ARG002
    ) -> None:
        """Give ``mod`` the names its ``if TYPE_CHECKING:`` block re-exports."""
        if mod.exports is None and isinstance(node, ast.Module):
            names = sorted(reexports(node))
            if names:
                mod.exports = list(names)
