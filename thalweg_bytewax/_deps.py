"""Import optional dependencies with an install hint instead of a bare ImportError."""

from __future__ import annotations

import importlib
import logging
import threading
from types import ModuleType

from thalweg_bytewax.errors import MissingDependencyError

__all__ = ["log_fallback_once", "require"]

_LOGGED: set[str] = set()

# Extras of earlier releases whose packages are now plain dependencies: a module of one
# missing means a broken environment, which the plain install repairs.
_PLAIN = frozenset({"contracts", "fast", "iceberg", "observability", "postgres", "sql"})
_LOGGED_LOCK = threading.Lock()


def log_fallback_once(logger: logging.Logger, level: int, message: str) -> None:
    """Log that a slower fallback runs (a native part was not built), once per process."""
    with _LOGGED_LOCK:
        if message in _LOGGED:
            return
        _LOGGED.add(message)
    logger.log(level, message)


def require(module: str, *, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the extra.

    Args:
        module: The importable module name, e.g. ``"pyiceberg"``.
        extra: The thalweg-bytewax extra that installs it, e.g. ``"files"``; an extra
            whose packages are now plain dependencies (``"iceberg"``) names the plain
            install.

    Returns:
        The imported module.

    Raises:
        MissingDependencyError: When the module cannot be imported.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        target = "thalweg-bytewax" if extra in _PLAIN else f"thalweg-bytewax[{extra}]"
        msg = (
            f"`{module}` is not installed; it is needed for this feature. "
            f'Install it with: pip install "{target}"'
        )
        raise MissingDependencyError(msg) from exc
