"""``thalweg proto bundle SRC``: the command, registered by :func:`add_commands`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from thalweg_bytewax.cli._subcommand import add_command_group, add_subcommand
from thalweg_bytewax.protobundle._discover import DEFAULT_INCLUDE_GLOB

__all__ = ["add_commands"]


def _bundle(args: argparse.Namespace) -> int:
    """Compile a proto source to a .pb, .proto files and a message manifest.

    Resolve a .proto file, a directory or a repository with many src/main/proto roots; keep one copy
    per import path (differing copies are an error naming both); list every missing import and
    import cycle at once; compile with the protoc grpcio-tools ships; write NAME.pb
    (FileDescriptorSet, for ProtobufCodec(descriptor_set=...)), NAME/<package>.proto, NAME.proto and
    NAME.messages.json, verified by a round trip.
    """
    from thalweg_bytewax.protobundle import build_bundle  # noqa: PLC0415

    b = build_bundle(
        args.source,
        name=args.name,
        include_roots=args.include_root,
        exclude=args.exclude,
        include_glob=args.include_glob,
        on_conflict=args.on_conflict,
    )
    if "odcs" in args.emit:
        from thalweg_bytewax.protobundle._emit import odcs_for_bundle  # noqa: PLC0415

        b = odcs_for_bundle(b, args.message)
    b = b.write(args.out_dir)
    out = sys.stdout
    packages = len(b.packages)
    messages = b.manifest["messages"]
    print(
        f"bundled {len(b.descriptor_set.file)} files ({packages} packages, {len(messages)} "
        f"message types) from {len(b.roots)} include roots; {b.duplicates} identical "
        "duplicates collapsed",
        file=out,
    )
    for path in b.files:
        print(f"  wrote {path}", file=out)
    single = "compilable" if b.single_compiles else "a combined view (several packages)"
    print(f"  {b.name}.proto is {single}", file=out)
    if b.package_cycles:
        cycles = "; ".join(" -> ".join(c) for c in b.package_cycles)
        print(
            f"  package cycles: {cycles}: the per-package files do not compile; the .pb does",
            file=out,
        )
    else:
        print("  round trip verified: the .proto files compile back to the .pb", file=out)
    print("  entry points: " + ", ".join(b.manifest["entry_points"]), file=out)
    return 0


def add_commands(sub: Any) -> None:
    """Add ``proto bundle`` to the CLI's subparsers.

    Args:
        sub: The ``argparse`` subparsers action of the ``thalweg`` parser.
    """
    proto = add_command_group(sub, "proto", summary="work with .proto sources")
    p = add_subcommand(proto, "bundle", _bundle)
    p.add_argument("source", type=Path, help="a .proto file, a directory or a repository")
    p.add_argument("--out-dir", type=Path, default=Path(), help="where to write (default: .)")
    p.add_argument("--name", help="base name of the outputs (default: the source's name)")
    p.add_argument(
        "--include-root", action="append", default=[], help="an extra include root (repeatable)"
    )
    p.add_argument("--exclude", action="append", default=[], help="skip directories of this name")
    p.add_argument(
        "--include-glob",
        default=DEFAULT_INCLUDE_GLOB,
        help=f"include roots in a repository (default: {DEFAULT_INCLUDE_GLOB})",
    )
    p.add_argument(
        "--on-conflict",
        choices=["error", "first-wins"],
        default="error",
        help=(
            "two differing copies of one import path: report them (error) or keep "
            "the first root's copy with a warning (first-wins)"
        ),
    )
    p.add_argument(
        "--emit",
        action="append",
        default=[],
        choices=["odcs"],
        help="also write NAME.odcs.yaml, an ODCS v3 contract of the entry-point messages",
    )
    p.add_argument(
        "--message",
        action="append",
        default=[],
        help="with --emit odcs: these message types (repeatable; default: entry points)",
    )
