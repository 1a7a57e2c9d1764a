"""Run librdkafka's mock Kafka cluster in this process until stdin closes or a signal.

Prints ``BOOTSTRAP <host:port,...>`` on the first line of stdout and, with
``--address-file``, writes the address (one line, ``host:port,...``) to that file, which
it removes again when it stops. The mock cluster is a real Kafka wire-protocol broker
implemented inside librdkafka; it lives as long as the client that created it, so it
runs in its own process. Its brokers listen on ports the system picks; ``--port N``
bootstraps on ``127.0.0.1:N`` instead, through a relay (``thalweg_bytewax.dev._fixed_port``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from confluent_kafka import Producer

from thalweg_bytewax.dev import _fixed_port
from thalweg_bytewax.dev._published import publish_line, withdraw_line

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Start the mock cluster, print its bootstrap address and wait."""
    parser = argparse.ArgumentParser(prog="python -m thalweg_bytewax.dev._mock_broker")
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--wait-stdin", action="store_true", help="stop when stdin closes")
    parser.add_argument("--address-file", type=Path, help="write the address to this file")
    parser.add_argument("--port", type=int, help="bootstrap on 127.0.0.1:PORT (a relay)")
    args = parser.parse_args(argv)
    relay_socket = _fixed_port.listen(args.port) if args.port is not None else None
    producer = Producer(
        {
            "test.mock.num.brokers": args.brokers,
            "bootstrap.servers": "",
            "log_level": 3,
        }
    )
    md = producer.list_topics(timeout=10)
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())
    if relay_socket is not None:
        first = min(md.brokers.values(), key=lambda b: b.id)
        bootstrap = _fixed_port.Relay(relay_socket, (first.host, first.port)).start().address
    sys.stdout.write(f"BOOTSTRAP {bootstrap}\n")
    sys.stdout.flush()
    if args.address_file is not None:
        publish_line(args.address_file, bootstrap)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.wait_stdin:

        def stop_on_eof() -> None:
            sys.stdin.read()
            stop.set()

        threading.Thread(target=stop_on_eof, daemon=True).start()
    try:
        while not stop.wait(0.5):
            producer.poll(0)
    finally:
        if args.address_file is not None:
            withdraw_line(args.address_file, bootstrap)  # only our own address
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
