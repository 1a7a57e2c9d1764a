"""A one-line file a running dev service publishes its address in, and takes back.

``thalweg dev kafka`` (the mock broker) and ``thalweg dev postgres`` publish their
address or DSN so another shell can find them; each removes the file when it stops,
but only while the file still holds its own line (a service started later may have
replaced it).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["publish_line", "withdraw_line"]


def publish_line(path: Path, text: str) -> None:
    """Publish ``text`` in ``path`` atomically (a reader never sees half a line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    staging.write_text(text + "\n")
    staging.replace(path)


def withdraw_line(path: Path, text: str) -> None:
    """Remove ``path`` if it still holds ``text``; never raises."""
    with contextlib.suppress(OSError):
        if path.read_text().strip() == text:
            path.unlink()
