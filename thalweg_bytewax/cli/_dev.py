"""``thalweg dev broker|produce|postgres``: a local broker, sample orders, a local PostgreSQL."""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from thalweg_bytewax.cli._subcommand import add_command_group, add_subcommand
from thalweg_bytewax.errors import ConfigError

__all__ = ["DEV_ADDRESS_FILE", "add_commands"]

DEV_ADDRESS_FILE = Path(".thalweg") / "broker"
"""Where ``thalweg dev broker`` publishes its address (relative to the working directory)."""


def _dev_broker(args: argparse.Namespace) -> int:
    """Start a local development Kafka broker."""
    from thalweg_bytewax.dev import _mock_broker

    if args.kafka:
        from thalweg_bytewax.dev import _kafka_serve

        print("starting Apache Kafka (KRaft) from Maven Central's jars; Ctrl-C stops it")
        print(f"its address goes to `{args.address_file}`, e.g. for $(cat {args.address_file})")
        sys.stdout.flush()
        return _kafka_serve.serve(
            args.brokers, args.address_file, data_dir=args.data_dir, port=args.port
        )

    print("starting a local development broker (librdkafka mock cluster); Ctrl-C stops it")
    print("topics auto-create with 4 partitions; it keeps about 5 MB per partition")
    print(f"its address goes to `{args.address_file}`, e.g. for $(cat {args.address_file})")
    sys.stdout.flush()
    argv = ["--brokers", str(args.brokers), "--address-file", str(args.address_file)]
    argv += ["--port", str(args.port)] if args.port is not None else []
    return _mock_broker.main(argv)


def _dev_postgres(args: argparse.Namespace) -> int:
    """Start a local PostgreSQL (pgserver) and print its DSN."""
    from thalweg_bytewax.dev import _postgres

    if args.print_dsn:
        print(_postgres.published_dsn(args.dsn_file, timedelta(seconds=args.wait_s)))
        return 0
    return _postgres.serve(args.data_dir, args.dsn_file)


def _broker_address(path: Path, wait_s: float) -> str:
    """The address a running ``thalweg dev broker`` published, waiting for it to start."""
    import socket
    import time

    deadline = time.monotonic() + wait_s
    while not path.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    if not path.is_file():
        msg = (
            f"dev produce: no `--bootstrap` given and no broker address in `{path}` after "
            f"{wait_s:g} s; start a broker with `thalweg dev broker &` in this directory, "
            "or pass `--bootstrap HOST:PORT`"
        )
        raise ConfigError(msg)
    bootstrap = path.read_text().strip()
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            pass
    except (OSError, ValueError):
        msg = (
            f"dev produce: no broker answers at `{bootstrap}` (from `{path}`, left by a "
            "broker that did not stop cleanly?); start one with `thalweg dev broker &`"
        )
        raise ConfigError(msg) from None
    return bootstrap


def _dev_produce(args: argparse.Namespace) -> int:
    """Write sample orders to a broker."""
    from thalweg_bytewax.testing import produce_sample_orders

    bootstrap = args.bootstrap or _broker_address(args.address_file, args.wait_s)
    n = produce_sample_orders(bootstrap, args.topic, args.count, seed=args.seed)
    where = f"`{args.topic}` on {bootstrap}"
    print(f"produced {n:,} sample orders (Confluent-framed Avro) to {where}")
    return 0


def add_commands(sub: Any) -> None:
    """Add ``dev broker|produce|postgres`` to the CLI's subparsers."""
    dev = add_command_group(sub, "dev", summary="try thalweg locally")
    broker = add_subcommand(dev, "broker", _dev_broker)
    broker.add_argument(
        "--brokers", type=int, default=1, help="how many brokers the cluster has (default: 1)"
    )
    broker.add_argument(
        "--port",
        type=int,
        help="bootstrap on 127.0.0.1:PORT, the same every run (default: a free port)",
    )
    broker.add_argument(
        "--address-file",
        type=Path,
        default=DEV_ADDRESS_FILE,
        help=f"write the broker address here while it runs (default: {DEV_ADDRESS_FILE})",
    )
    broker.add_argument(
        "--kafka",
        action="store_true",
        help="run Apache Kafka (needs Java 17+; Maven fetches its jars once) instead of "
        "librdkafka's mock cluster",
    )
    broker.add_argument(
        "--data-dir",
        type=Path,
        default=Path(".thalweg") / "kafka",
        help="with --kafka: where the brokers keep their data (default: .thalweg/kafka)",
    )
    prod = add_subcommand(dev, "produce", _dev_produce)
    prod.add_argument(
        "--bootstrap",
        help="host:port of the broker (default: the address `thalweg dev broker` wrote)",
    )
    prod.add_argument(
        "--address-file",
        type=Path,
        default=DEV_ADDRESS_FILE,
        help=f"where `thalweg dev broker` wrote its address (default: {DEV_ADDRESS_FILE})",
    )
    prod.add_argument(
        "--wait-s",
        type=float,
        default=30.0,
        help="how long to wait for a just-started broker's address (default: 30)",
    )
    prod.add_argument("--topic", default="orders", help="the topic to write (default: orders)")
    prod.add_argument("--count", type=int, default=10_000, help="how many orders (default: 10000)")
    prod.add_argument(
        "--seed", type=int, default=7, help="the same seed writes the same orders (default: 7)"
    )
    pg = add_subcommand(dev, "postgres", _dev_postgres)
    pg.add_argument(
        "--data-dir",
        type=Path,
        default=Path(".thalweg") / "postgres",
        help="where the server keeps its data between runs (default: .thalweg/postgres)",
    )
    pg.add_argument(
        "--dsn-file",
        type=Path,
        default=Path(".thalweg") / "postgres.dsn",
        help="write the DSN here while it runs (default: .thalweg/postgres.dsn)",
    )
    pg.add_argument(
        "--print-dsn",
        action="store_true",
        help="print the DSN of the running server (waiting for it) instead of starting one",
    )
    # A first start runs initdb: seconds on a laptop, tens of seconds on a loaded CI box.
    pg.add_argument(
        "--wait-s",
        type=float,
        default=120.0,
        help="with --print-dsn: how long to wait for a starting server (default: 120)",
    )
