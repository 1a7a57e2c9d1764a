"""thalweg-bytewax: Kafka topics and files into trustworthy tables on Bytewax.

Core building blocks live here (record model, metadata columns, codecs, contracts);
Bytewax inputs and outputs live in :mod:`thalweg_bytewax.connectors`, operators in
:mod:`thalweg_bytewax.operators`. Importing this package loads no optional client.
"""

from __future__ import annotations

from thalweg_bytewax._excepthook import install as _install_excepthook
from thalweg_bytewax._moved import install as _install_moved_names
from thalweg_bytewax.errors import (
    ConfigError,
    DecodeError,
    MissingDependencyError,
    SchemaError,
    SidecarError,
    SidecarTransientError,
    SinkError,
    SinkTerminalError,
    SinkTransientError,
    SourceError,
    ThalwegError,
    TransientError,
)
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns, MetadataPolicy
from thalweg_bytewax.records.model import Locator, RawRecord

__version__ = "0.1.0"

_install_moved_names()  # a module that moved stays importable by its old name
_install_excepthook()  # a failed run ends with the thalweg error, not Bytewax's text

__all__: list[str] = ["__version__"]
__all__ += ["ConfigError", "DecodeError", "MissingDependencyError", "SchemaError"]
__all__ += ["SidecarError", "SidecarTransientError", "SinkError", "SinkTerminalError"]
__all__ += ["SinkTransientError", "SourceError", "ThalwegError", "TransientError"]
__all__ += ["DEFAULT_PREFIX", "Locator", "MetadataColumns", "MetadataPolicy", "RawRecord"]
