"""``thalweg schema to-odcs FILE``: the command, registered by :func:`add_commands`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from thalweg_bytewax.cli._subcommand import add_command_group, add_subcommand

__all__ = ["add_commands"]


def _to_odcs(args: argparse.Namespace) -> int:
    """An ODCS v3 contract from Avro (.avsc) or JSON Schema files.

    Write an ODCS v3 data contract with one schema object per file: types, required, descriptions,
    nested objects, enums as allowed values; what ODCS cannot say is stated under
    description.limitations. It loads back with load_contract to the Arrow schema the codec decodes
    to.
    """
    from thalweg_bytewax.schemamodel import model_from_file, to_odcs_yaml  # noqa: PLC0415

    models = [model_from_file(p) for p in args.files]
    text = to_odcs_yaml(models, contract_id=args.id or Path(args.files[0]).stem)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
        sys.stdout.write(f"wrote {args.out} ({len(models)} schema objects)\n")
    return 0


def add_commands(sub: Any) -> None:
    """Add ``schema to-odcs`` to the CLI's subparsers.

    Args:
        sub: The ``argparse`` subparsers action of the ``thalweg`` parser.
    """
    schema = add_command_group(sub, "schema", summary="convert schemas")
    p = add_subcommand(schema, "to-odcs", _to_odcs)
    p.add_argument("files", nargs="+", type=Path, help=".avsc or JSON Schema files")
    p.add_argument("--out", type=Path, help="write here instead of stdout")
    p.add_argument("--id", help="the contract id (default: the first file's stem)")
