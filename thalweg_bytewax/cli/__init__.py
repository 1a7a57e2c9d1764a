"""The ``thalweg`` command line.

Commands:

* ``thalweg dev broker`` — start a local development Kafka broker (librdkafka's mock
  cluster, a real wire-protocol broker), print its address and write it to
  ``.thalweg/broker`` until Ctrl-C.
* ``thalweg dev produce`` — write sample orders to it (or to ``--bootstrap HOST:PORT``).
* ``thalweg dev postgres`` — start a local PostgreSQL (pgserver) with its data in
  ``.thalweg/postgres``, print its DSN and write it to ``.thalweg/postgres.dsn`` until
  Ctrl-C; ``--print-dsn`` prints the DSN of the one running (waiting for it to start).
* ``thalweg lane stats PATH`` — count the records per topic-partition of a lane.
* ``thalweg recovery check MODULE[:FLOW] DIR`` — before resuming a flow, check that
  its recovery directory holds state only for partitions the flow still lists.
* ``thalweg recovery migrate-keys MODULE[:FLOW] DIR`` — with the flow stopped, move the
  dedup and windowed-unique state a release before routing keys stored under partition
  keys to the partitions' routing keys.
* ``thalweg coverage STORE`` — per sink, the covered offset ranges, gaps and lag
  against the raw lane (``--raw-lane SINK``) and the source (``--bootstrap``);
  ``--json`` for machines.
* ``thalweg recover MODULE --sink NAME`` — replay what one sink lacks from the raw lane,
  through the flow's own path, into that sink alone; Kafka is not read.
* ``thalweg check MODULE[:FLOW]`` — run the build-time gates on a flow (a Kafka source
  written to a second sink needs a raw lane).
* ``thalweg config validate|show|secrets [FILE]`` — load a configuration (TOML <
  ``THALWEG_*`` < ``--set``) and check it, print it with secrets as references, or list
  the secret references it needs; ``thalweg init [PATH]`` writes a commented starter.
* ``thalweg proto bundle SRC`` — compile a proto source (file, directory, repository
  with many ``src/main/proto`` roots) to a FileDescriptorSet, ``.proto`` files and a
  message manifest; ``--emit odcs`` adds an ODCS contract (docs/schemas.md).
* ``thalweg schema to-odcs FILE...`` — an ODCS v3 contract from Avro or JSON Schema.
* ``thalweg run NAME`` — run a flow that ships with the package (``orders``, the
  flagship) under Bytewax's runner; options after the name go to the runner.
* ``thalweg cluster FLOW`` — this pod's process of a Bytewax cluster: the process id
  from the StatefulSet ordinal, the addresses from the headless service, the recovery
  partitions created once; exits with the flow's exit code (docs/deploy.md).
* ``thalweg batch CONFIG`` — run a pipeline configuration over files, exactly once per
  file and row (a rerun resumes), with a progress bar and a summary.
* ``thalweg describe-schema ...`` — print the exact Arrow schema a source decodes to
  (from a registry subject or id, an ``.avsc``, a ``.pb`` + message, or a JSON Schema),
  with the metadata columns a policy appends and DuckDB type hints.
* ``thalweg sidecar serve MODULE:FUNCTION [--port N]`` — serve a function
  ``pa.RecordBatch -> pa.RecordBatch`` over Arrow Flight to ``flight_transform`` steps.
* ``thalweg query [SQL]`` — SQL (DuckDB) over a data directory's lanes and Iceberg
  tables; ``thalweg describe MODULE[:FLOW]`` — a flow's steps as a Mermaid flowchart.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
import traceback
from collections.abc import Sequence

from thalweg_bytewax import __version__
from thalweg_bytewax._excepthook import summary_line, thalweg_cause
from thalweg_bytewax.cli._common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    attach_examples,
)
from thalweg_bytewax.cli._dev import DEV_ADDRESS_FILE
from thalweg_bytewax.errors import ThalwegError

__all__ = ["DEV_ADDRESS_FILE", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "main"]

_EXIT_CODES = "exit codes: 0 ok, 1 failed (reported), 2 usage or configuration, 130 interrupted"


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The whole command line, built once per process.

    Building it adds every subcommand's arguments (about 16 ms of CPU); a process that
    calls :func:`main` again (a test, a notebook) parses with the same parser. Nothing
    in it depends on the environment: defaults read from ``THALWEG_*`` are read by the
    commands when they run, and help is formatted at the terminal's width of that time.
    """
    from thalweg_bytewax.cli import (
        _batch,
        _cluster,
        _describe,
        _dev,
        _lanes,
        _query,
        _run,
        _schema,
        _sidecar,
    )
    from thalweg_bytewax.config._cli import add_commands as add_config
    from thalweg_bytewax.protobundle._cli import add_commands as add_proto
    from thalweg_bytewax.schemamodel._cli import add_commands as add_schema

    parser = argparse.ArgumentParser(prog="thalweg", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--version", action="version", version=f"thalweg-bytewax {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (
        _dev.add_commands,  # dev broker|produce|postgres
        _lanes.add_commands,  # lane stats, recovery check/migrate-keys, coverage, recover, check
        _schema.add_commands,  # describe-schema
        _batch.add_commands,  # batch
        _query.add_commands,  # query
        _describe.add_commands,  # describe
        _run.add_commands,  # run
        _cluster.add_commands,  # cluster
        _sidecar.add_commands,  # sidecar serve
        add_config,  # config validate|show|secrets, init
        add_proto,  # proto bundle
        add_schema,  # schema to-odcs
    ):
        add(sub)
    attach_examples(parser)
    parser.epilog = f"{parser.epilog}\n\n{_EXIT_CODES}"
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``thalweg`` console script.

    Returns:
        The exit code: :data:`EXIT_OK`, :data:`EXIT_FAILED`, :data:`EXIT_USAGE` or
        :data:`EXIT_INTERRUPTED` (docs/cli.md).
    """
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    try:
        return int(args.func(args))
    except ThalwegError as exc:
        print(f"thalweg: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        # A flow run by `batch` or `recover` fails inside Bytewax, which wraps the
        # thalweg error in its own runtime error after printing a Rust panic: end with
        # the thalweg error (the traceback too with -v), and keep the run's exit code.
        err = thalweg_cause(exc)
        if err is None:
            raise
        if args.verbose:
            traceback.print_exception(exc)
        print(summary_line(err), file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
