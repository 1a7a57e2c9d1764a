"""``thalweg sidecar serve MODULE:FUNCTION``: the reference Flight sidecar, until Ctrl-C."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from thalweg_bytewax.cli._subcommand import add_command_group, add_subcommand

__all__ = ["add_commands"]


def _serve(args: argparse.Namespace) -> int:
    """Serve a function pa.RecordBatch -> pa.RecordBatch to `flight_transform` steps.

    Serve MODULE:FUNCTION over Arrow Flight (one DoExchange per batch) until Ctrl-C. The function
    gets each batch with its _twg_ columns and returns a batch that keeps their locator columns, row
    for row.
    """
    from thalweg_bytewax.flight.sidecar import SidecarServer, load_function

    if "" not in sys.path:  # a module in the working directory, as `python -m` finds it
        sys.path.insert(0, "")
    function = load_function(args.function)
    server = SidecarServer(function, f"grpc://{args.host}:{args.port}")
    print(f"serving {args.function} at grpc://{args.host}:{server.port}", flush=True)
    try:
        server.serve()
    except KeyboardInterrupt:
        server.shutdown()
    return 0


def add_commands(sub: Any) -> None:
    """Add ``sidecar serve`` to the CLI's subparsers."""
    sidecar = add_command_group(
        sub, "sidecar", summary="run user code over batches out of process (Arrow Flight)"
    )
    serve = add_subcommand(sidecar, "serve", _serve)
    serve.add_argument("function", metavar="MODULE:FUNCTION", help="the function to serve")
    serve.add_argument(
        "--port", type=int, default=8815, help="the port (default: 8815; 0: a free one)"
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)"
    )
