"""A ``thalweg`` subcommand described by its handler's docstring.

The command modules of the CLI (and the ``config``, ``proto`` and ``schema`` commands
of their packages) add their commands with :func:`add_subcommand`, so what a command
does is written once, beside the code that does it: the handler's summary line is the
line the parent command's ``--help`` lists it with, and the paragraphs after it are
its own ``--help`` description. ``add_subcommand(sub, "describe", _describe)`` adds
``thalweg describe``, which calls ``_describe(args)``; a command with commands of its
own (``thalweg dev broker``) is a group, :func:`add_command_group`.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["add_command_group", "add_subcommand", "description_of", "summary_of"]


def summary_of(run: Callable[..., Any]) -> str:
    """``run``'s summary line as argparse lists a command: lower case, no final period.

    An initial acronym (``SQL over the lanes...``) keeps its case.

    Raises:
        TypeError: When ``run`` has no docstring (every command says what it does).
    """
    doc = inspect.getdoc(run)
    if not doc:
        msg = f"command handler {run.__qualname__} expected a docstring; got none"
        raise TypeError(msg)
    line = doc.partition("\n")[0].rstrip(".")
    return line if line[1:2].isupper() else line[:1].lower() + line[1:]


def description_of(run: Callable[..., Any]) -> str | None:
    """The paragraphs of ``run``'s docstring after its summary line, as one line.

    Argparse wraps it to the terminal; None when the docstring has no more than the
    summary line.
    """
    _, _, body = (inspect.getdoc(run) or "").partition("\n\n")
    return " ".join(body.split()) or None


def add_subcommand(
    sub: Any, name: str, run: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """Add command ``name`` to the subparsers ``sub``; it calls ``run`` with the arguments.

    Args:
        sub: An ``argparse`` subparsers action.
        name: The command's name.
        run: What the command does, returning the exit code; its docstring describes
            the command (:func:`summary_of`, :func:`description_of`).

    Returns:
        The command's parser, to add its arguments to.
    """
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=summary_of(run), description=description_of(run)
    )
    parser.set_defaults(func=run)
    return parser


def add_command_group(sub: Any, name: str, *, summary: str, description: str | None = None) -> Any:
    """Add command ``name``, which only holds commands, to the subparsers ``sub``.

    Args:
        sub: An ``argparse`` subparsers action.
        name: The group's name (``dev`` of ``thalweg dev broker``).
        summary: The line the parent command's ``--help`` lists it with.
        description: Its own ``--help`` description, if any.

    Returns:
        The group's subparsers action (one of its commands is required), to add its
        commands to with :func:`add_subcommand`.
    """
    group = sub.add_parser(name, help=summary, description=description)
    return group.add_subparsers(dest=name, required=True)
