"""The thalweg error as the last thing a failed run prints.

Bytewax runs a flow's callbacks (a sink's ``write_batch``, a source's ``next_batch``,
a ``build``) on its Rust workers: an exception there prints a Rust panic message (and,
with ``RUST_BACKTRACE`` set, dozens of frames), and reaches Python as a
``BytewaxRuntimeError`` whose traceback ends in Bytewax's own text, with the thalweg
error somewhere in its cause chain. :func:`install` chains a :data:`sys.excepthook`
that prints the usual traceback and then, last, the thalweg error on its own line; the
``thalweg`` commands print that line with :func:`thalweg_cause`.
"""

from __future__ import annotations

import sys
from types import TracebackType

from thalweg_bytewax.errors import ThalwegError

__all__ = ["install", "summary_line", "thalweg_cause"]

_MAX_CHAIN = 64
"""Causes followed at most: a chain is finite, but a cycle must not hang the hook."""


def thalweg_cause(exc: BaseException) -> ThalwegError | None:
    """The outermost thalweg error in ``exc``'s cause and context chain, or None.

    Args:
        exc: The exception a run ended with (``exc`` itself counts).

    Returns:
        The first :class:`~thalweg_bytewax.errors.ThalwegError` met walking from
        ``exc`` through ``__cause__`` (else ``__context__``); None when there is none.
    """
    seen: BaseException | None = exc
    for _ in range(_MAX_CHAIN):
        if seen is None:
            return None
        if isinstance(seen, ThalwegError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def summary_line(err: ThalwegError) -> str:
    """``thalweg: SinkTerminalError: <message>``: the error, readable on its own."""
    return f"thalweg: {type(err).__name__}: {err}"


def _hook(
    previous: object,
    kind: type[BaseException],
    exc: BaseException,
    tb: TracebackType | None,
) -> None:
    if callable(previous):
        previous(kind, exc, tb)
    err = thalweg_cause(exc)
    if err is not None and err is not exc:
        sys.stderr.write(f"\n{summary_line(err)}\n")
        sys.stderr.flush()


class _Hook:
    """The installed hook; a class so a second :func:`install` recognizes it."""

    def __init__(self, previous: object) -> None:
        self.previous = previous

    def __call__(
        self, kind: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        _hook(self.previous, kind, exc, tb)


def install() -> None:
    """Chain the hook in front of the current :data:`sys.excepthook` (once).

    The previous hook still prints the traceback; an uncaught exception whose chain
    holds a thalweg error that is not the exception itself gets that error appended
    as the last line.
    """
    if not isinstance(sys.excepthook, _Hook):
        sys.excepthook = _Hook(sys.excepthook)
