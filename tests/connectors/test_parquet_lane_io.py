"""Lane I/O failures leave the Parquet sink as sink errors, never as a raw ``OSError``.

A real file system failure (the topic directory's name is taken by a regular file, so
the partition directory cannot be created) is a terminal sink error naming the lane and
the path, with the ``OSError`` kept as its cause; which errno values count as transient
is covered in ``tests/core/test_errors.py``.
"""

from __future__ import annotations

from pathlib import Path

import bytewax.operators as op
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import SinkError, SinkTerminalError
from thalweg_bytewax.record import Locator, RawRecord, raw_batch_from_records


def _chain(exc: BaseException | None) -> list[BaseException]:
    found: list[BaseException] = []
    while exc is not None and exc not in found:
        found.append(exc)
        exc = exc.__cause__ or exc.__context__
    return found


def test_a_file_system_failure_is_a_terminal_sink_error(tmp_path: Path) -> None:
    lane = tmp_path / "lane"
    lane.mkdir()
    (lane / "orders").write_bytes(b"not a directory")
    sink = ParquetSink(lane)
    batch = raw_batch_from_records(
        [RawRecord(Locator("orders", 0, o, "c"), b"k", b"v") for o in range(3)]
    )
    flow = Dataflow("lane_io")
    op.output("out", op.input("in", flow, TestingSource([("orders:0", batch)])), sink)
    with pytest.raises(Exception) as info:  # noqa: PT011 - Bytewax wraps it
        run_main(flow)
    chain = _chain(info.value)
    errors = [e for e in chain if isinstance(e, SinkError)]
    assert errors, chain
    error = errors[0]
    assert isinstance(error, SinkTerminalError) and not error.retryable
    assert str(error).startswith(f"parquet sink `{lane}`: opening the partition directory")
    assert f"`{lane}/orders/0`" in str(error)
    assert isinstance(error.__cause__, OSError)
    # No raw OSError reaches Bytewax ahead of the sink error.
    assert not isinstance(chain[0], OSError)
