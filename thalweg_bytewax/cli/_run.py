"""``thalweg run NAME``: a flow that ships with the package, under Bytewax's runner.

``thalweg run orders`` is ``python -m bytewax.run thalweg_bytewax.flows.orders``: the
flagship flow from any installation, no checkout needed. Arguments after the name go
to the runner (``-w 2``, ``-r recovery/``, ``-s 30`` ...); the flow's own settings come
from its ``THALWEG_*`` variables.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from thalweg_bytewax.cli._subcommand import add_subcommand
from thalweg_bytewax.flows import BUNDLED

__all__ = ["add_commands", "runner_argv"]


def runner_argv(name: str, runner_args: list[str]) -> list[str]:
    """The command line that runs the bundled flow ``name`` with Bytewax's runner.

    Args:
        name: A key of :data:`thalweg_bytewax.flows.BUNDLED`, e.g. ``"orders"``.
        runner_args: Options for ``bytewax.run`` (workers, recovery, epoch interval).
    """
    return [sys.executable, "-m", "bytewax.run", *runner_args, BUNDLED[name]]


def _run(args: argparse.Namespace) -> int:
    """Run a flow that ships with the package (orders, pipeline).

    Run a bundled flow with Bytewax's runner, as `python -m bytewax.run thalweg_bytewax.flows.NAME`
    would: the flagship `orders` reads the embedded sample (or Kafka, with
    THALWEG_BOOTSTRAP_SERVERS) into lanes and tables under ./thalweg-data; `pipeline` runs the TOML
    file THALWEG_CONFIG names (`thalweg init` writes one). Options after NAME go to the runner.
    """
    argv = runner_argv(args.name, list(args.runner_args))
    sys.stdout.flush()
    sys.stderr.flush()
    # The runner replaces this process: its signals, output and exit code are the run's.
    os.execv(argv[0], argv)  # noqa: S606 - our own interpreter, a fixed module
    return 0  # pragma: no cover - execv does not return


def add_commands(sub: Any) -> None:
    """Add ``run`` to the CLI's subparsers."""
    run = add_subcommand(sub, "run", _run)
    run.add_argument("name", choices=sorted(BUNDLED), help="the bundled flow")
    run.add_argument(
        "runner_args",
        nargs=argparse.REMAINDER,
        metavar="...",
        help="options for python -m bytewax.run (e.g. -w 2, -r DIR)",
    )
