"""The one exception tree of thalweg-bytewax.

Every error the library raises derives from :class:`ThalwegError`. Areas get their own
subclass, builtin mixins keep ``except ValueError`` style handlers working, and sinks
split on a retry axis (:class:`SinkTransientError` vs :class:`SinkTerminalError`).
All exceptions round-trip through :mod:`pickle`, because Bytewax workers and recovery
pickle things.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DecodeError",
    "MissingDependencyError",
    "SchemaError",
    "SinkError",
    "SinkTerminalError",
    "SinkTransientError",
    "SourceError",
    "ThalwegError",
]


class ThalwegError(Exception):
    """Base of every error thalweg-bytewax raises."""

    __module__ = "thalweg_bytewax"


class ConfigError(ThalwegError, ValueError):
    """A configuration value is invalid; the message says which and what to do."""

    __module__ = "thalweg_bytewax"


class MissingDependencyError(ThalwegError, ImportError):
    """An optional dependency is not installed; the message has the pip line."""

    __module__ = "thalweg_bytewax"


class SourceError(ThalwegError):
    """A source cannot read: unreachable brokers, a missing topic, a fatal client error."""

    __module__ = "thalweg_bytewax"


class DecodeError(ThalwegError):
    """A payload could not be decoded; becomes a DLQ record with reason ``decode``."""

    __module__ = "thalweg_bytewax"


class SchemaError(ThalwegError):
    """A schema cannot be resolved, parsed or mapped to Arrow."""

    __module__ = "thalweg_bytewax"


class SinkError(ThalwegError):
    """A sink could not write or commit."""

    __module__ = "thalweg_bytewax"


class SinkTransientError(SinkError):
    """A sink failure worth retrying with backoff (connection lost, timeout)."""

    __module__ = "thalweg_bytewax"


class SinkTerminalError(SinkError):
    """A sink failure that retrying cannot fix; the epoch fails loudly, naming the target."""

    __module__ = "thalweg_bytewax"
