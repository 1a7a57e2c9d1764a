"""The arguments ``python -m bytewax.run`` parsed, when this process is such a run."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["bytewax_run_arguments"]


def bytewax_run_arguments() -> dict[str, Any] | None:
    """The keyword arguments ``bytewax.run`` parsed from its command line.

    Returns:
        Its ``kwargs`` (``addresses``, ``process_id``, ``recovery_config``, ...), or
        ``None`` when ``__main__`` is not ``bytewax.run`` or has parsed none yet.
    """
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is None or spec.name != "bytewax.run":
        return None
    kwargs = getattr(main, "kwargs", None)
    return kwargs if isinstance(kwargs, dict) else None
