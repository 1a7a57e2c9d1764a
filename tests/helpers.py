"""Small typed helpers shared by the tests: running a flow, building RawBatches, errors."""

from __future__ import annotations

import contextlib
import dataclasses
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow, Stream
from bytewax.outputs import Sink
from bytewax.recovery import RecoveryConfig
from bytewax.testing import TestingSink, TestingSource, run_main

from tests.fixtures.flows import EntryPoint
from thalweg_bytewax.lanes.dlq import Rejected
from thalweg_bytewax.records.batches import raw_batch_from_columns, raw_batch_from_records
from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.records.model import Locator, RawRecord

__all__ = [
    "HttpGet",
    "HttpReply",
    "HttpServer",
    "Outputs",
    "cause_of",
    "closed_port",
    "error_chain",
    "located",
    "locator_of",
    "raw_batch",
    "raw_values",
    "run_flow",
    "run_into",
    "serve_http",
    "table_of",
]

E = TypeVar("E", bound=BaseException)
"""An exception type looked for in a chain."""

Outputs = dict[str, list[Any]]
"""What each output stream of a flow received, by stream name: the ``(key, value)`` items."""

BASE_TIMESTAMP_MS = 1_700_000_000_000
"""Record timestamps of the built batches start here (2023-11-14, UTC)."""


def locator_of(rejected: Rejected) -> Locator:
    """The locator of a DLQ row read back from a source-fed flow: it must have one."""
    assert rejected.locator is not None, rejected
    return rejected.locator


def located(data: pa.Table | pa.RecordBatch) -> list[tuple[int, int]]:
    """(partition, offset) of each row of a lane, table or batch, in order."""
    cols = MetadataColumns()
    return list(
        zip(
            data[cols.source_partition].to_pylist(),
            data[cols.source_offset].to_pylist(),
            strict=True,
        )
    )


def raw_batch(
    topic: str, partition: int, offsets: Iterable[int], tag: str = "", cluster: str = "c"
) -> pa.RecordBatch:
    """A RawBatch of one source partition: key ``b"k"``, values ``<tag>v<offset>``."""
    return raw_batch_from_records(
        [
            RawRecord(Locator(topic, partition, o, cluster), b"k", f"{tag}v{o}".encode())
            for o in offsets
        ]
    )


def raw_values(
    values: Sequence[bytes | None],
    *,
    topic: str = "orders",
    partition: int = 0,
    first: int = 0,
    keys: Sequence[bytes | None] | None = None,
    headers: Any = None,
    cluster: str = "test",
) -> pa.RecordBatch:
    """A RawBatch of ``values`` at offsets ``first, first + 1, ...``.

    Keys default to ``k0, k1, ...`` and timestamps to one millisecond apart.
    """
    n = len(values)
    return raw_batch_from_columns(
        topic=topic,
        partition=partition,
        offsets=list(range(first, first + n)),
        keys=list(keys) if keys is not None else [f"k{i}".encode() for i in range(n)],
        values=list(values),
        timestamps_ms=[BASE_TIMESTAMP_MS + i for i in range(n)],
        headers=headers,
        cluster=cluster,
    )


def run_flow(
    items: list[Any],
    build: Callable[[Stream[Any]], Any],
    *,
    flow_id: str,
    entry_point: EntryPoint = run_main,
    source_batch: int = 1,
    into: Mapping[str, list[Any]] | None = None,
    **run_kwargs: Any,
) -> Outputs:
    """Run ``build`` over a TestingSource of ``items``; return what each output received.

    Args:
        items: The source items, usually ``(key, batch)`` pairs.
        build: Given the input stream (step ``inp``), returns one stream (collected as
            ``"out"``) or a dataclass of streams (each stream field collected under its
            name; other fields are passed over).
        flow_id: The dataflow id (step ids and keys derived from it are asserted).
        entry_point: ``run_main`` or one of the ``entry_point`` fixture's runners.
        source_batch: The TestingSource batch size.
        into: Lists to collect into, by output name (they fill even when the run fails).
        **run_kwargs: Passed to the entry point (``epoch_interval``, ``recovery_config``).

    Returns:
        The items each output stream received, by name.
    """
    flow = Dataflow(flow_id)
    out = build(op.input("inp", flow, TestingSource(items, batch_size=source_batch)))
    streams: dict[str, Stream[Any]] = (
        {"out": out}  # a Stream is a dataclass itself
        if isinstance(out, Stream)
        else {
            f.name: getattr(out, f.name)
            for f in dataclasses.fields(out)
            if isinstance(getattr(out, f.name), Stream)
        }
    )
    got: Outputs = {name: [] if into is None else into[name] for name in streams}
    for name, stream in streams.items():
        # A suffix: an output named like the operator's own step would clash with it.
        op.output(f"{name}_out", stream, TestingSink(got[name]))
    entry_point(flow, **run_kwargs)
    return got


def run_into(
    items: list[Any],
    sink: Sink[Any],
    *,
    flow_id: str = "sink",
    recovery: Path | None = None,
    entry_point: EntryPoint = run_main,
) -> None:
    """Run ``items`` from a TestingSource (step ``in``) straight into ``sink`` (step ``out``).

    With ``recovery`` (an initialised recovery directory) every item closes an epoch.
    """
    flow = Dataflow(flow_id)
    op.output("out", op.input("in", flow, TestingSource(items)), sink)
    if recovery is None:
        entry_point(flow)
    else:
        entry_point(
            flow, epoch_interval=timedelta(0), recovery_config=RecoveryConfig(str(recovery))
        )


def table_of(items: list[tuple[str, pa.RecordBatch]]) -> pa.Table | None:
    """The batches of ``(key, batch)`` items as one table, or None when there are none."""
    batches = [b for _, b in items]
    return pa.Table.from_batches(batches) if batches else None


def error_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (or contexts), outermost first."""
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def cause_of(exc: BaseException, kind: type[E]) -> E:
    """The first error of type ``kind`` in the chain of ``exc``: Bytewax wraps step errors.

    A step that raises inside a flow surfaces from the entry point as a
    ``BytewaxRuntimeError`` whose cause is the original error.
    """
    for e in error_chain(exc):
        if isinstance(e, kind):
            return e
    raise AssertionError(f"no {kind.__name__} in {error_chain(exc)!r}")


@dataclasses.dataclass(frozen=True)
class HttpGet:
    """One GET a test server received: its number (from 0), path and Authorization header."""

    index: int
    path: str
    authorization: str


HttpReply = tuple[int, str, bytes]
"""A test server's answer: status, content type and body."""


@dataclasses.dataclass(frozen=True)
class HttpServer:
    """A running test server: its ``http://127.0.0.1:<port>`` URL and the GETs it received."""

    url: str
    requests: list[HttpGet]


@contextlib.contextmanager
def serve_http(answer: Callable[[HttpGet], HttpReply]) -> Iterator[HttpServer]:
    """A real HTTP server on a free local port answering each GET with ``answer(get)``."""
    requests: list[HttpGet] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            get = HttpGet(len(requests), self.path, self.headers.get("Authorization", ""))
            status, content_type, body = answer(get)
            requests.append(get)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass  # keep the test output clean

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # `shutdown` waits for the serving loop to look at its flag, once a poll interval
    # (0.5 s by default): a test would wait that long for each server it ends.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    )
    thread.start()
    try:
        yield HttpServer(f"http://127.0.0.1:{server.server_port}", requests)
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    """A local port nothing listens on: connections to ``127.0.0.1`` there are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pod_hosts(n: int, ports: int = 1) -> tuple[list[str], list[int]]:
    """Distinct loopback addresses for ``n`` simulated pods, and ``ports`` ports free on each.

    Linux routes all of 127.0.0.0/8 to the loopback interface, so each "pod" gets an
    address of its own (``127.R.S.2``, ``127.R.S.3``, ... with ``R.S`` drawn at random, so
    concurrent runs on one machine stay apart) and binds only that one, with the same
    port on every pod, as the pods of a StatefulSet all listen on 2101.
    """
    import random  # noqa: PLC0415 - only this helper draws addresses

    rng = random.SystemRandom()
    for _ in range(50):
        prefix = f"127.{rng.randrange(1, 255)}.{rng.randrange(0, 256)}"
        hosts = [f"{prefix}.{i + 2}" for i in range(n)]
        socks = []
        try:
            for _ in range(ports):
                first = socket.socket()
                socks.append(first)
                first.bind((hosts[0], 0))
                for host in hosts[1:]:
                    s = socket.socket()
                    socks.append(s)
                    s.bind((host, first.getsockname()[1]))
            chosen = [int(s.getsockname()[1]) for s in socks[:: len(hosts)]]
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        return hosts, chosen
    msg = f"no {ports} port(s) were free on {n} loopback addresses in 50 draws"
    raise RuntimeError(msg)


def cluster_addresses(n: int) -> str:
    """``-a`` for a Bytewax cluster of ``n`` processes: ports on 127.0.0.1 free a moment ago."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ";".join(f"127.0.0.1:{p}" for p in ports)


REPO_ROOT = Path(__file__).resolve().parents[1]


def run_probe(
    code: str, *args: str, env: Mapping[str, str] | None = None, unset: Iterable[str] = ()
) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter from the repository's root; the JSON object
    it prints last. ``env`` is added to this process's environment, without ``unset``.
    For what a test cannot measure in its own process (per-process flags, allocators'
    state)."""
    full = {k: v for k, v in os.environ.items() if k not in set(unset)} | dict(env or {})
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO_ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return seen
