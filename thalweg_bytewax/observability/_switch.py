"""The process's observability switch: on or off, and the OTLP export armed for it.

Dependency-free state that :mod:`.gate` (the ``observe_*`` checks), :mod:`.hooks`
(:func:`~.hooks.observe` and ``reset()``) and :mod:`.otlp` (``arm``) read and set, so
none of them imports another for it. The gate answers these names too.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .settings import OtlpExport

__all__ = ["HTTP_HOST_ENV", "HTTP_PORT_ENV", "arm", "is_armed", "is_on", "set_on", "take_armed"]

HTTP_PORT_ENV = "THALWEG_HTTP_PORT"
"""The environment variable that turns observability on and names the server's port."""
HTTP_HOST_ENV = "THALWEG_HTTP_HOST"
"""The environment variable naming the interface to bind (``127.0.0.1`` by default)."""

_on = False
_armed: OtlpExport | None = None
_arm_lock = threading.Lock()


def is_on() -> bool:
    """Whether the hooks are on in this process."""
    return _on


def set_on(on: bool) -> None:
    """Turn the hooks on or off (``observe()`` and ``reset()`` call it; off disarms)."""
    global _on, _armed
    _on = on
    if not on:
        _armed = None


def arm(export: OtlpExport) -> None:
    """Turn observability on, with OTLP export, when the first partition is built.

    :func:`thalweg_bytewax.observability.otlp.arm` calls it for a flow built from a
    configuration that asks for OTLP export; :func:`~.hooks.observe` takes it.
    """
    global _armed
    _armed = export


def is_armed() -> bool:
    """Whether an OTLP export is armed and not yet taken."""
    return _armed is not None


def take_armed() -> OtlpExport | None:
    """The armed OTLP export, once (``observe()`` builds its exporters), else None."""
    global _armed
    with _arm_lock:
        export, _armed = _armed, None
    return export
