"""flight_transform: a real Flight sidecar in this process, answers checked by locator."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import thalweg_bytewax.operators as twg
from tests.helpers import cause_of, raw_batch, run_flow
from thalweg_bytewax.errors import ConfigError, SidecarError
from thalweg_bytewax.flight.breaker import BreakerState, CircuitBreaker
from thalweg_bytewax.flight.sidecar import BatchFunction, SidecarServer
from thalweg_bytewax.lanes.dlq import DLQ_MESSAGE, DLQ_REASON
from thalweg_bytewax.operators.sidecar import _Caller
from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS

OFF = DEFAULT_COLUMNS.source_offset


@pytest.fixture
def sidecar() -> Iterator[Callable[[BatchFunction], SidecarServer]]:
    servers: list[SidecarServer] = []

    def start(function: BatchFunction) -> SidecarServer:
        servers.append(SidecarServer(function).serve_in_thread())
        return servers[-1]

    yield start
    for server in servers:
        server.shutdown()


def with_length(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.append_column("length", pc.binary_length(batch.column("_twg_source_value")))


def items() -> list[tuple[str, pa.RecordBatch]]:
    return [("t:0", raw_batch("t", 0, range(5))), ("t:1", raw_batch("t", 1, range(10, 13)))]


def transform(location: str, **options: Any) -> Callable[..., twg.FlightTransformOut]:
    return lambda up: twg.flight_transform("sidecar", up, location=location, **options)


def test_metadata_columns_survive_the_round_trip(sidecar: Callable[..., SidecarServer]) -> None:
    server = sidecar(with_length)
    given = items()
    out = run_flow(given, transform(server.location), flow_id="fx")
    assert out["rejected"] == []
    sent = dict(given)
    for key, batch in out["ok"]:
        assert batch.column("length").to_pylist() == [
            len(v) for v in sent[key]["_twg_source_value"].to_pylist()
        ]
        for name in sent[key].schema.names:  # every _twg_ column, unchanged
            assert batch.column(name).equals(sent[key].column(name)), name


def test_metadata_columns_a_sidecar_leaves_out_are_put_back(
    sidecar: Callable[..., SidecarServer],
) -> None:
    def locator_only(batch: pa.RecordBatch) -> pa.RecordBatch:
        keep = ["_twg_source_topic", "_twg_source_partition", "_twg_source_offset"]
        return with_length(batch).select([*keep, "length"])

    given = items()
    out = run_flow(given, transform(sidecar(locator_only).location), flow_id="fx")
    key, batch = out["ok"][0]
    assert batch.column("_twg_ingest_ts").equals(dict(given)[key].column("_twg_ingest_ts"))
    assert batch.schema.names[0] == "length"  # the sidecar's columns, then the metadata


@pytest.mark.parametrize(
    ("function", "problem"),
    [
        (lambda b: b.slice(1), "expected one reply row per request row"),
        (
            lambda b: b.take(pa.array([1, 0, *range(2, b.num_rows)])),
            "request row 0 is `t:0@0`; got `t:0@1`",
        ),
        (lambda b: pa.concat_batches([b, b.slice(0, 1)]), "got 6 (more)"),
    ],
    ids=["dropped", "reordered", "invented"],
)
def test_a_sidecar_that_drops_reorders_or_adds_rows_is_refused(
    sidecar: Callable[..., SidecarServer], function: BatchFunction, problem: str
) -> None:
    with pytest.raises(Exception) as info:
        run_flow(items(), transform(sidecar(function).location), flow_id="fx")
    error = cause_of(info.value, SidecarError)
    assert problem in str(error)
    assert "flight_transform `fx.sidecar`" in str(error)


def test_one_to_many_takes_runs_that_repeat_the_locator_and_refuses_a_missing_row(
    sidecar: Callable[..., SidecarServer],
) -> None:
    def twice(batch: pa.RecordBatch) -> pa.RecordBatch:
        idx = pa.array([i // 2 for i in range(2 * batch.num_rows)])
        return batch.take(idx).append_column("copy", pa.array([i % 2 for i in range(len(idx))]))

    out = run_flow(items(), transform(sidecar(twice).location, rows="one_to_many"), flow_id="fx")
    key, batch = out["ok"][0]
    assert batch.column(OFF).to_pylist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert (
        batch.column("_twg_record_id").to_pylist()[0:2]
        == [dict(items())[key].column("_twg_record_id")[0].as_py()] * 2
    )

    def drops_row_two(batch: pa.RecordBatch) -> pa.RecordBatch:
        return twice(batch).filter(pc.not_equal(twice(batch).column(OFF), 2))

    with pytest.raises(Exception) as info:
        run_flow(
            items(), transform(sidecar(drops_row_two).location, rows="one_to_many"), flow_id="fx"
        )
    assert "request row 2 is `t:0@2`; got `t:0@3`" in str(cause_of(info.value, SidecarError))


def test_a_timeout_is_retried_then_the_batch_goes_to_the_dlq_with_its_reason(
    sidecar: Callable[..., SidecarServer],
) -> None:
    release = threading.Event()
    calls: list[int] = []

    def stuck(batch: pa.RecordBatch) -> pa.RecordBatch:
        calls.append(batch.num_rows)
        release.wait(60)  # held until the test ends: every attempt times out
        return batch

    server = sidecar(stuck)
    try:
        out = run_flow(
            items()[:1],
            transform(
                server.location,
                # Long beside connecting to a server in this process, also on a loaded
                # machine: at 200 ms an attempt could time out still connecting, and
                # fail as unavailable rather than as the stuck call it is here for.
                timeout=timedelta(seconds=1),
                retries=2,
                retry_backoff=timedelta(0),
            ),
            flow_id="fx",
        )
    finally:
        release.set()
    assert out["ok"] == []
    ((key, dlq),) = out["rejected"]
    assert key == "t:0" and dlq.num_rows == 5
    assert set(dlq.column(DLQ_REASON).to_pylist()) == {"retry_exhausted"}
    message = dlq.column(DLQ_MESSAGE)[0].as_py()
    assert "FlightTimedOutError" in message and "3 attempts" in message
    assert dlq.column(OFF).to_pylist() == list(range(5))
    assert len(calls) == 3


def test_a_failure_then_a_success_is_retried_to_the_answer(
    sidecar: Callable[..., SidecarServer],
) -> None:
    failures = [1]

    def flaky(batch: pa.RecordBatch) -> pa.RecordBatch:
        if failures:
            failures.pop()
            raise RuntimeError("model not loaded yet")
        return with_length(batch)

    out = run_flow(
        items(), transform(sidecar(flaky).location, retry_backoff=timedelta(0)), flow_id="fx"
    )
    assert out["rejected"] == []
    assert sum(b.num_rows for _, b in out["ok"]) == 8


def test_a_flapping_sidecar_opens_the_breaker_and_a_probe_closes_it(
    sidecar: Callable[..., SidecarServer],
) -> None:
    down = threading.Event()
    down.set()
    calls: list[int] = []

    def flapping(batch: pa.RecordBatch) -> pa.RecordBatch:
        calls.append(1)
        if down.is_set():
            raise RuntimeError("restarting")
        return with_length(batch)

    now = [0.0]
    breaker = CircuitBreaker(2, timedelta(seconds=30), clock=lambda: now[0])
    caller = _Caller(
        "score",
        sidecar(flapping).location,
        rows="one_to_one",
        timeout=timedelta(seconds=5),
        retries=0,
        retry_backoff=timedelta(0),
        breaker=breaker,
        pool_size=1,
        token=None,
        command=b"",
        columns=DEFAULT_COLUMNS,
    )
    batch = raw_batch("t", 0, range(3))
    for _ in range(2):  # two consecutive failures open it
        assert caller.run(batch).rejected is not None
    assert breaker.state is BreakerState.OPEN and len(calls) == 2
    refused = caller.run(batch).rejected  # open: to the DLQ without a call
    assert refused is not None and len(calls) == 2
    assert "circuit open" in refused.column(DLQ_MESSAGE)[0].as_py()
    down.clear()  # the sidecar is back, but the breaker waits out its cool-down
    assert caller.run(batch).rejected is not None and len(calls) == 2
    now[0] = 31.0
    answer = caller.run(batch)  # the probe
    assert answer.ok is not None and answer.ok.column("length").to_pylist() == [2, 2, 2]
    assert breaker.state.value == "closed" and breaker.opened == 1


def test_a_failed_probe_opens_the_breaker_again() -> None:
    now = [0.0]
    breaker = CircuitBreaker(3, timedelta(seconds=10), clock=lambda: now[0])
    for _ in range(3):
        breaker.failure()
    now[0] = 10.0
    assert breaker.allow() and not breaker.allow()  # one probe at a time
    breaker.failure()
    assert breaker.state is BreakerState.OPEN and breaker.opened == 2
    now[0] = 15.0
    assert not breaker.allow()


def test_bad_options_are_refused_at_build_time() -> None:
    with pytest.raises(ConfigError, match="expected a location such as"):
        run_flow(items(), transform("http://x"), flow_id="fx")
    with pytest.raises(ConfigError, match="expected rows 'one_to_one' or 'one_to_many'"):
        run_flow(items(), transform("grpc://127.0.0.1:1", rows="many"), flow_id="fx")


def test_a_batch_without_locators_is_refused_with_the_remedy(
    sidecar: Callable[..., SidecarServer],
) -> None:
    bare = [("k", pa.RecordBatch.from_pydict({"x": [1, 2]}))]
    with pytest.raises(Exception) as info:
        run_flow(bare, transform(sidecar(with_length).location), flow_id="fx")
    assert "metadata='locator'" in str(cause_of(info.value, SidecarError))
