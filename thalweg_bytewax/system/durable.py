"""Make what is on a local disk durable: ``fsync`` a file or a directory by its path."""

from __future__ import annotations

import os

__all__ = ["fsync_path"]


def fsync_path(path: str | os.PathLike[str]) -> None:
    """``fsync`` the file or directory at ``path``.

    A directory is synced after a file is renamed into it, so the new name survives a
    crash; a file, before it is renamed to its final name.

    Raises:
        OSError: As :func:`os.open` and :func:`os.fsync` raise it.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
