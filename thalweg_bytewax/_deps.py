"""Import optional dependencies with an install hint instead of a bare ImportError."""

from __future__ import annotations

import importlib
from types import ModuleType

from thalweg_bytewax.errors import MissingDependencyError

__all__ = ["require"]


def require(module: str, *, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the extra.

    Args:
        module: The importable module name, e.g. ``"pyiceberg"``.
        extra: The thalweg-bytewax extra that installs it, e.g. ``"iceberg"``.

    Returns:
        The imported module.

    Raises:
        MissingDependencyError: When the module cannot be imported.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        msg = (
            f"`{module}` is not installed; it is needed for this feature. "
            f'Install it with: pip install "thalweg-bytewax[{extra}]"'
        )
        raise MissingDependencyError(msg) from exc
