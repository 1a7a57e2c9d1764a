"""The command-line reference, generated from the parser itself (``docs/cli.md``).

Every command and every option the parser knows is listed, with its default and its
help, so the page cannot fall behind the command line: a test compares the two.
"""

from __future__ import annotations

import argparse

__all__ = ["render_cli_reference"]


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """``(words, parser)`` of every command that takes no further subcommand, in order."""
    found: list[tuple[tuple[str, ...], argparse.ArgumentParser]] = []
    for action in parser._actions:  # noqa: SLF001 - argparse has no public walk
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in action.choices.items():
                found.extend(_commands(sub, (*path, name)))
            return found
    return [(path, parser)]


def _cell(text: str) -> str:
    """``text`` on one line, safe in a Markdown table cell (no pipe, no HTML tag)."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;")


def _option(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest.upper()}`"
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return f"`{names}`"
    metavar = action.metavar or action.dest.upper()
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    return f"`{names} {metavar}`"


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], ""):
        return ""
    return f"`{action.default}`"


def render_cli_reference(parser: argparse.ArgumentParser) -> str:
    """A Markdown section per command: what it does, then a table of its arguments.

    Args:
        parser: The ``thalweg`` parser (``thalweg_bytewax.cli._parser()``).

    Returns:
        The reference, one ``###`` heading per command.
    """
    out: list[str] = []
    for words, command in _commands(parser, ()):
        out.extend([f"### `thalweg {' '.join(words)}`", ""])
        if command.description:
            out.extend([_cell(command.description), ""])
        rows = [
            a
            for a in command._actions  # noqa: SLF001
            if not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS  # noqa: SLF001
        ]
        if rows:
            out.extend(["| argument | default | meaning |", "|---|---|---|"])
            out.extend(f"| {_option(a)} | {_default(a)} | {_cell(a.help or '')} |" for a in rows)
            out.append("")
    return "\n".join(out)
