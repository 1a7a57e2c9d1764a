"""The one exception tree of thalweg-bytewax, with a retry axis.

Every error the library raises derives from :class:`ThalwegError`. Areas get their own
subclass, and builtin mixins keep ``except ValueError`` style handlers working.

Every error says whether retrying can help: :attr:`ThalwegError.retryable` is ``True``
exactly for subclasses of :class:`TransientError` (a registry outage, a lost sink
connection, a full disk) and ``False`` for everything else, which is terminal (bad
configuration, a bad schema, bad data). Code acts on it: the registry client retries
transient failures with bounded backoff before raising one, the ``decode`` operator
dead-letters terminal decode failures per record but lets a registry outage stop the
flow, and sinks classify client errors into :class:`SinkTransientError` and
:class:`SinkTerminalError`.

All exceptions round-trip through :mod:`pickle` with their fields, because Bytewax
workers and recovery pickle things: constructor arguments are kept in ``self.args``.
"""

from __future__ import annotations

import errno
from enum import StrEnum
from typing import Any, ClassVar

__all__ = [
    "ConfigError",
    "DecodeError",
    "FailureKind",
    "MissingDependencyError",
    "SchemaError",
    "SidecarError",
    "SidecarTransientError",
    "SinkError",
    "SinkTerminalError",
    "SinkTransientError",
    "SourceError",
    "ThalwegError",
    "TransientError",
    "sink_io_error",
]


class ThalwegError(Exception):
    """Base of every error thalweg-bytewax raises.

    Attributes:
        retryable: Whether retrying the failed operation can help. ``False`` (terminal)
            unless the class derives from :class:`TransientError`.
    """

    retryable: ClassVar[bool] = False

    @property
    def message(self) -> str:
        """The human-readable message (the first constructor argument)."""
        return str(self.args[0]) if self.args else ""

    def __str__(self) -> str:
        return self.message


class TransientError(ThalwegError):
    """Retrying can help: an outage, a lost connection, a timeout, a full disk.

    Catch it to retry with backoff; anything else is terminal.
    """

    retryable: ClassVar[bool] = True


class ConfigError(ThalwegError, ValueError):
    """A configuration value is invalid; the message says which and what to do."""


class MissingDependencyError(ThalwegError, ImportError):
    """An optional dependency is not installed; the message has the pip line."""


class SourceError(ThalwegError):
    """A source cannot read: unreachable brokers, a missing topic, a fatal client error."""


class FailureKind(StrEnum):
    """Stable short codes for why one payload failed to decode.

    Also importable as ``thalweg_bytewax.codecs.FailureKind``.
    """

    NULL_PAYLOAD = "null_payload"
    """A tombstone (null value) reached a decoder."""
    BAD_FRAMING = "bad_framing"
    """Wrong magic byte, or too short to hold the framing."""
    UNKNOWN_SCHEMA = "unknown_schema"
    """The schema id or GUID is not known to the registry."""
    MALFORMED = "malformed"
    """The body is corrupt or truncated, or not valid for its writer schema."""
    SCHEMA_MISMATCH = "schema_mismatch"
    """The record decoded but cannot be resolved to the output schema."""
    RESERVED_FIELD = "reserved_field"
    """The payload has a field under the reserved metadata prefix."""


class DecodeError(ThalwegError):
    """A payload could not be decoded; becomes a DLQ record with reason ``decode``.

    Terminal: the same bytes fail the same way on every retry. The codecs raise
    subclasses that differ only in their default ``kind``.

    Args:
        message: What failed and where, in the error-message grammar.
        kind: Why, as a stable :class:`FailureKind`; the class's ``default_kind`` when
            omitted.

    Attributes:
        kind: Why the payload failed.
    """

    default_kind: ClassVar[FailureKind] = FailureKind.MALFORMED

    def __init__(self, message: str, kind: FailureKind | str | None = None) -> None:
        resolved = self.default_kind if kind is None else FailureKind(kind)
        super().__init__(message, resolved)
        self.kind = resolved

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.kind), self.__dict__ or None)


class SchemaError(ThalwegError):
    """A schema cannot be resolved, parsed or mapped to Arrow.

    Terminal, except for :class:`~thalweg_bytewax.registry.RegistryUnavailableError`.
    """


class SinkError(ThalwegError):
    """A sink could not write or commit."""


class SinkTransientError(SinkError, TransientError):
    """A sink failure worth retrying with backoff (connection lost, timeout, disk full)."""


class SinkTerminalError(SinkError):
    """A sink failure that retrying cannot fix; the epoch fails loudly, naming the target."""


class SidecarError(ThalwegError):
    """A sidecar (a Flight service a step sends its batches to) failed or answered wrongly.

    Terminal as raised: a reply that dropped, reordered or invented rows, or an answer
    that is no record batch, means the sidecar must be fixed.
    """


class SidecarTransientError(SidecarError, TransientError):
    """A sidecar call worth retrying: a timeout, the service down or its code raising."""


# Every error shows, and pickles, as the package's (`thalweg_bytewax.ConfigError`): where
# users import it from.
for _error in (
    ThalwegError,
    TransientError,
    ConfigError,
    MissingDependencyError,
    SourceError,
    DecodeError,
    SchemaError,
    SinkError,
    SinkTransientError,
    SinkTerminalError,
    SidecarError,
    SidecarTransientError,
):
    _error.__module__ = "thalweg_bytewax"
del _error

# errno values where the same write can succeed later: the resource frees up (space,
# quota, a busy file, a full file table) or the storage comes back (a network
# filesystem's stale handle or timeout). Everything else (permission denied, a missing
# directory, a read-only filesystem, EIO) needs a person.
_TRANSIENT_ERRNOS = frozenset(
    code
    for code in (
        getattr(errno, name, None)
        for name in (
            "EAGAIN", "EINTR", "EBUSY", "ENOSPC", "EDQUOT", "EMFILE", "ENFILE",
            "ETIMEDOUT", "ESTALE", "ECONNRESET", "ECONNABORTED", "ENETDOWN",
            "ENETUNREACH", "EHOSTUNREACH",
        )
    )
    if code is not None
)  # fmt: skip


def sink_io_error(message: str, exc: OSError) -> SinkError:
    """The sink error for a failed file operation, classified by ``errno``, never text.

    Raise it ``from exc`` at the I/O boundary of a file sink, so no raw :class:`OSError`
    leaves a sink.

    Args:
        message: Names the sink, the target and what failed (grammar rule 8); the OS
            reason is appended.
        exc: The error the operation raised.

    Returns:
        A :class:`SinkTransientError` when the same write can succeed later (disk full,
        quota, busy, timeout, stale handle), else a :class:`SinkTerminalError`.
    """
    reason = exc.strerror or type(exc).__name__
    if exc.errno in _TRANSIENT_ERRNOS:
        return SinkTransientError(f"{message} ({reason}); retrying can help once it clears")
    return SinkTerminalError(f"{message} ({reason}); fix the target and restart the flow")
