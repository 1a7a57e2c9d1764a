"""A user's module named on the command line, imported as ``bytewax.run`` would."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

from thalweg_bytewax.errors import ConfigError

__all__ = ["import_user_module"]


def import_user_module(
    module_name: str, *, where: str, role: str = "flow module", hint: str = ""
) -> ModuleType:
    """Import ``module_name`` with the working directory first on ``sys.path``.

    ``python -m bytewax.run`` finds a flow module in the working directory; a command
    naming one finds it there too.

    Args:
        module_name: The dotted module name the user gave.
        where: The command, as messages name it (``"recover"``).
        role: What the module is, as messages name it (``"flow module"``).
        hint: Appended to the message (``"; check `--model`"``).

    Raises:
        ConfigError: When the module does not import, naming it and why.
    """
    sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        msg = f"{where}: cannot import {role} `{module_name}` ({exc}){hint}"
        raise ConfigError(msg) from exc
