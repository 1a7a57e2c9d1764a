"""Every ``thalweg`` command's ``--help`` ends with an example; exit codes are documented."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from thalweg_bytewax.cli import _parser, main

REPO = Path(__file__).resolve().parents[2]


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                out += _commands(child, (*path, name))
    return out


COMMANDS = _commands(_parser())


def test_the_walk_finds_every_command_group():
    names = {" ".join(c) for c in COMMANDS}
    assert {"batch", "dev produce", "config validate", "init", "recover", "proto bundle"} <= names


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "thalweg")
def test_help_has_an_example(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert "example:" in lines, f"`thalweg {' '.join(command)} --help` shows no example"
    example = lines[lines.index("example:") + 1].strip()
    assert example.startswith("$ thalweg"), example


def test_exit_codes_are_documented_where_the_cli_says():
    docs = (REPO / "docs" / "cli.md").read_text()
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 130 |"):
        assert code in docs, f"docs/cli.md has no exit-code row {code}"
    with pytest.raises(SystemExit):
        main(["--help"])


def test_a_bad_argument_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["dev", "produce", "--count", "many"])
    assert exit_.value.code == 2


def test_the_reference_lists_every_command_and_option_as_the_parser_has_them():
    import re

    from thalweg_bytewax.cli import _parser
    from thalweg_bytewax.cli._reference import render_cli_reference

    docs = (REPO / "docs" / "cli.md").read_text()
    block = re.search(r"<!-- cli-reference -->\n(.*?)<!-- /cli-reference -->", docs, re.S)
    assert block is not None
    generated = render_cli_reference(_parser())
    assert block.group(1) == generated, "regenerate it with render_cli_reference(_parser())"
    for command in ("run", "cluster", "query", "dev broker", "config secrets", "proto bundle"):
        assert f"### `thalweg {command}`" in generated
    # every argument says what it is for
    undocumented = [row for row in generated.splitlines() if row.startswith("| `") and row.endswith("|  |")]
    assert not undocumented, undocumented
