"""FlightSource: a flight's endpoints as partitions, resumed after the rows they emitted."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, run_main
from typing_extensions import override

from tests.helpers import located, raw_batch, run_into
from thalweg_bytewax.connectors.flight import FlightSink, FlightSource
from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.flight.table_server import TableServer
from thalweg_bytewax.records.model import KeyedBatch

WAIT_S = 30.0


def run_main_collect(source: FlightSource) -> list[KeyedBatch]:
    got: list[KeyedBatch] = []
    flow = Dataflow("from_flight")
    op.output("out", op.input("in", flow, source), TestingSink(got))
    run_main(flow)
    return got


class PlainServer(flight.FlightServerBase):  # type: ignore[misc]
    """A Flight server that knows nothing of thalweg: two endpoints of numbered rows."""

    def __init__(self) -> None:
        super().__init__("grpc://127.0.0.1:0")

    @override
    def get_flight_info(
        self, context: Any, descriptor: flight.FlightDescriptor
    ) -> flight.FlightInfo:
        endpoints = [flight.FlightEndpoint(json.dumps({"part": i}).encode(), []) for i in range(2)]
        return flight.FlightInfo(self.table(0)[0].schema, descriptor, endpoints, -1, -1)

    @staticmethod
    def table(part: int) -> list[pa.RecordBatch]:
        values = [part * 1000 + i for i in range(25)]
        table = pa.Table.from_pydict({"x": values}).combine_chunks()
        batches: list[pa.RecordBatch] = table.to_batches(max_chunksize=10)
        return batches

    @override
    def do_get(self, context: Any, ticket: flight.Ticket) -> flight.RecordBatchStream:
        part = json.loads(ticket.ticket)["part"]
        return flight.RecordBatchStream(pa.Table.from_batches(self.table(part)))


@pytest.fixture
def plain() -> Iterator[PlainServer]:
    server = PlainServer()
    try:
        yield server
    finally:
        server.shutdown()


def poll(part: Any, until_rows: int | None = None) -> list[KeyedBatch]:
    """Batches of a partition until its end (or ``until_rows`` rows)."""
    out: list[KeyedBatch] = []
    deadline = time.monotonic() + WAIT_S
    while until_rows is None or sum(b.num_rows for _, b in out) < until_rows:
        assert time.monotonic() < deadline, "the partition did not end"
        try:
            out.extend(part.next_batch())
        except StopIteration:
            break
        time.sleep(0.005)
    return out


def test_rows_a_flight_sink_stored_come_back_keyed_with_their_locators(
    table_server: TableServer,
) -> None:
    items = [("t:0", raw_batch("t", 0, range(30))), ("t:1", raw_batch("t", 1, range(5)))]
    run_into(items, FlightSink(table_server.location, "orders"))
    got = run_main_collect(FlightSource(table_server.location, "orders"))
    assert {key for key, _ in got} == {"t:0", "t:1"}
    rows = sorted(r for _, b in got for r in located(b))
    assert rows == [(0, o) for o in range(30)] + [(1, o) for o in range(5)]
    assert all("_twg_record_id" in b.schema.names for _, b in got)


def test_a_resumed_partition_starts_after_the_last_row_it_emitted(plain: PlainServer) -> None:
    location = f"grpc://127.0.0.1:{plain.port}"
    source = FlightSource(location, "numbers", max_queued_batches=1)
    assert source.list_parts() == ["numbers:0", "numbers:1"]
    part = source.build_part("in", "numbers:1", None)
    first = poll(part, until_rows=10)
    state = part.snapshot()
    part.close()
    last_seen = first[-1][1].column("_twg_source_offset")[-1].as_py()
    assert state == last_seen + 1
    resumed = source.build_part("in", "numbers:1", state)
    rest = poll(resumed)
    resumed.close()
    offsets = [o for _, b in rest for o in b.column("_twg_source_offset").to_pylist()]
    assert offsets[0] == last_seen + 1 and offsets[-1] == 24
    values = [v for _, b in first + rest for v in b.column("x").to_pylist()]
    assert values == [1000 + i for i in range(25)]  # every row once
    assert {key for key, _ in rest} == {"numbers:1"}


def test_an_unreachable_server_is_a_clear_error(plain: PlainServer) -> None:
    source = FlightSource("grpc://127.0.0.1:1", "numbers", token="hunter2")
    with pytest.raises(SourceError, match="asking for flight `numbers` failed") as info:
        source.list_parts()
    assert "hunter2" not in str(info.value)
