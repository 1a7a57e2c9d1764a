"""FlightSink: rows land once on the server, replays are skipped, secrets never shown."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from tests.helpers import located, raw_batch, run_into
from thalweg_bytewax.connectors.flight import FlightSink
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.flight.protocol import confirm_message, confirmed_seq
from thalweg_bytewax.flight.table_server import TableServer


def held(server: TableServer, partitions: int = 2) -> pa.Table:
    tables = [server.read("orders", "t", p) for p in range(partitions)]
    return pa.concat_tables([t for t in tables if t is not None])


def test_rows_land_once_with_their_metadata_columns(table_server: TableServer) -> None:
    sink = FlightSink(table_server.location, "orders", shards=2)
    items = [("t:0", raw_batch("t", 0, range(i, i + 10))) for i in range(0, 50, 10)]
    items += [("t:1", raw_batch("t", 1, range(20)))]
    run_into(items, sink)
    table = held(table_server)
    assert sorted(located(table)) == [(0, o) for o in range(50)] + [(1, o) for o in range(20)]
    sent = items[0][1]
    for name in sent.schema.names:  # every _twg_ column survives, and the sink stamps emit time
        assert name in table.schema.names
    assert table.column("_twg_emit_ts").null_count == 0


def test_a_second_run_replaying_skips_what_the_server_holds(table_server: TableServer) -> None:
    run_into([("t:0", raw_batch("t", 0, range(100)))], FlightSink(table_server.location, "orders"))
    run_into(
        [("t:0", raw_batch("t", 0, range(50, 120))), ("t:0", raw_batch("t", 0, range(120, 150)))],
        FlightSink(table_server.location, "orders"),
    )
    assert located(held(table_server, 1)) == [(0, o) for o in range(150)]
    # The sink skipped the replayed 50..99 itself (it asked what the server holds):
    # nothing reached the server's own dedup.
    assert (table_server.rows_stored, table_server.rows_skipped) == (150, 0)


def test_the_token_is_never_shown_and_a_bad_location_is_refused() -> None:
    sink = FlightSink("grpc://127.0.0.1:1", "orders", token="hunter2")
    assert "hunter2" not in repr(sink.config)
    assert "hunter2" not in str(sink.config.model_dump(mode="json"))
    with pytest.raises(ConfigError, match="flight sink: `location`: expected a Flight location"):
        FlightSink("http://example/", "orders")


def test_the_server_skips_rows_whose_locator_it_holds(table_server: TableServer) -> None:
    batch = raw_batch("t", 0, range(10))
    with flight.FlightClient(table_server.location) as client:
        for _ in range(2):  # a replay the sink could not skip (no coverage asked)
            writer, reader = client.do_put(flight.FlightDescriptor.for_path("orders"), batch.schema)
            writer.write_batch(batch)
            writer.write_metadata(pa.py_buffer(confirm_message(1, {"t:0": 9})))
            assert confirmed_seq(reader.read()) == 1
            writer.close()
    assert located(held(table_server, 1)) == [(0, o) for o in range(10)]
    assert (table_server.rows_stored, table_server.rows_skipped) == (10, 10)


def test_a_held_ids_answer_outside_its_bounds_is_refused_before_it_is_used() -> None:
    from thalweg_bytewax.errors import SinkTerminalError
    from thalweg_bytewax.flight.protocol import HELD_IDS_SCHEMA, held_ids, held_ids_answer

    ids = pa.array([bytes(16)] * 3, pa.binary(16))
    answer = held_ids_answer(pa.table([pa.array([4, 5, 6]), ids], schema=HELD_IDS_SCHEMA))
    assert held_ids([answer], 4, 6, where="w").column("offset").to_pylist() == [4, 5, 6]
    with pytest.raises(SinkTerminalError, match="answered offsets outside 4..5"):
        held_ids([answer], 4, 5, where="w")
    with pytest.raises(SinkTerminalError, match="got 2 results"):
        held_ids([answer, answer], 4, 6, where="w")
    with pytest.raises(SinkTerminalError, match="bytes that are not one"):
        held_ids([flight.Result(b'{"spans": []}')], 4, 6, where="w")
    huge = flight.Result(b"\0" * (2 << 20))
    with pytest.raises(SinkTerminalError, match="of at most 1048640 bytes for 1 offsets"):
        held_ids([huge], 4, 4, where="w")


class _SpansOnlyServer(TableServer):
    """A target that implements the three required calls, without `twg.held_ids`."""

    def list_actions(self, context: object) -> list[tuple[str, str]]:
        return super().list_actions(context)[:1]


def test_a_server_without_held_ids_is_still_a_target_checked_by_offset(tmp_path: Path) -> None:
    server = _SpansOnlyServer(tmp_path / "server").serve_in_thread()
    try:
        run_into([("t:0", raw_batch("t", 0, range(10)))], FlightSink(server.location, "orders"))
        sink = FlightSink(server.location, "orders", shards=1)
        part = sink.build_part("s", "shard-000", None)
        try:  # other records at the offsets held: by offset alone, they are replays
            part.write_batch([raw_batch("t", 0, range(10), cluster="other")])
            assert part.stats.rows_skipped_replay == 10  # noqa: PLR2004
        finally:
            part.close()
    finally:
        server.shutdown()
    assert server.rows_stored == 10  # noqa: PLR2004
