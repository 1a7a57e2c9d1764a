"""Private: the check the Parquet sink and the Arrow IPC connectors make of a ``filesystem``."""

from __future__ import annotations

import pyarrow.fs as pafs

from thalweg_bytewax.errors import ConfigError

__all__ = ["check_filesystem"]


def check_filesystem(component: str, filesystem: object) -> None:
    """Refuse anything but a ``pyarrow.fs.FileSystem`` (or None), saying how to wrap fsspec.

    Raises:
        ConfigError: Naming the connector and the type given.
    """
    if filesystem is not None and not isinstance(filesystem, pafs.FileSystem):
        msg = (
            f"{component}: `filesystem` expected a `pyarrow.fs.FileSystem` or None; got "
            f"{type(filesystem).__name__} (wrap an fsspec file system in "
            f"`pyarrow.fs.PyFileSystem(pyarrow.fs.FSSpecHandler(fs))`)"
        )
        raise ConfigError(msg)
