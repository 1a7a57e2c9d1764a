"""The Flight sink's ack lane: bursts confirmed in one round trip, bounded when the server stalls."""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from tests.helpers import raw_batch
from thalweg_bytewax.connectors.flight._ack_lane import AckLane
from thalweg_bytewax.errors import SinkTransientError
from thalweg_bytewax.flight.table_server import TableServer

WAIT_S = 30.0
"""How long a test waits for a condition before it fails (a hang, not a slow machine)."""


def lane_to(server: TableServer, *, max_bytes: int, max_burst: int = 64) -> AckLane:
    def open_stream(client: flight.FlightClient, schema: pa.Schema) -> Any:
        return client.do_put(flight.FlightDescriptor.for_path("orders"), schema)

    return AckLane(
        component="flight sink `orders`",
        location=server.location,
        connect=lambda: flight.FlightClient(server.location),
        open_stream=open_stream,
        max_unconfirmed_bytes=max_bytes,
        max_burst=max_burst,
        retry_for=5.0,
    )


def wait_for(condition: object) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_a_burst_is_confirmed_with_one_round_trip_for_many_batches(
    table_server: TableServer,
) -> None:
    table_server.stall()  # batches queue up while the first burst waits
    lane = lane_to(table_server, max_bytes=1 << 30)
    try:
        batches = [raw_batch("t", 0, range(i * 10, i * 10 + 10)) for i in range(40)]
        for i, batch in enumerate(batches):
            lane.send(batch, {"t:0": i * 10 + 9})  # returns at once: the lane took it
        table_server.resume()
        lane.wait_confirmed(WAIT_S)
        assert lane.confirmed == {"t:0": 399}
        assert lane.stats.confirms < len(batches)  # coalesced
        assert lane.stats.max_burst > 1
        assert table_server.rows_stored == 400
    finally:
        lane.close()


def test_a_stalled_server_fills_the_channel_and_send_blocks_within_the_bound(
    table_server: TableServer,
) -> None:
    batch = raw_batch("t", 0, range(100))
    bound = 8 * batch.nbytes
    table_server.stall()
    lane = lane_to(table_server, max_bytes=bound)
    sent = []

    def produce() -> None:
        for i in range(200):
            lane.send(raw_batch("t", 0, range(i * 100, i * 100 + 100)), {"t:0": i * 100 + 99})
            sent.append(i)

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    try:
        wait_for(lambda: lane.stats.blocked_sends > 0)
        # The producer is held: what it handed over is within the bound, not 200 batches.
        assert lane.stats.peak_unconfirmed_bytes <= bound
        assert len(sent) <= 8
        table_server.resume()
        writer.join(WAIT_S)
        assert not writer.is_alive()
        lane.wait_confirmed(WAIT_S)
        assert lane.stats.peak_unconfirmed_bytes <= bound
        assert table_server.rows_stored == 20_000
    finally:
        table_server.resume()
        lane.close()


def test_a_confirm_that_never_comes_fails_the_lane_loudly(table_server: TableServer) -> None:
    table_server.stall()
    lane = lane_to(table_server, max_bytes=1 << 30)
    try:
        lane.send(raw_batch("t", 0, range(10)), {"t:0": 9})
        with pytest.raises(SinkTransientError, match="1 batches not confirmed within 0.2 s"):
            lane.wait_confirmed(0.2)
        with pytest.raises(SinkTransientError, match="is the server stalled"):
            lane.send(raw_batch("t", 0, range(10, 20)), {"t:0": 19})  # failed for good
        assert lane.confirmed == {}
    finally:
        table_server.resume()
        lane.close()
