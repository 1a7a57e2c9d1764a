"""Lane I/O failures leave the Parquet sink as sink errors, never as a raw ``OSError``.

A real file system failure (the topic directory's name is taken by a regular file, so
the partition directory cannot be created) is a terminal sink error naming the lane and
the path, with the ``OSError`` kept as its cause; which errno values count as transient
is covered in ``tests/test_errors.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import error_chain, raw_batch, run_into
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import SinkError, SinkTerminalError


def test_a_file_system_failure_is_a_terminal_sink_error(tmp_path: Path) -> None:
    lane = tmp_path / "lane"
    lane.mkdir()
    (lane / "orders").write_bytes(b"not a directory")
    sink = ParquetSink(lane)
    with pytest.raises(SinkTerminalError) as info:
        run_into([("orders:0", raw_batch("orders", 0, range(3)))], sink, flow_id="lane_io")
    chain = error_chain(info.value)
    errors = [e for e in chain if isinstance(e, SinkError)]
    assert errors, chain
    error = errors[0]
    assert isinstance(error, SinkTerminalError) and not error.retryable
    assert str(error).startswith(f"parquet sink `{lane}`: opening the partition directory")
    assert f"`{lane}/orders/0`" in str(error)
    assert isinstance(error.__cause__, OSError)
    # No raw OSError reaches Bytewax ahead of the sink error.
    assert not isinstance(chain[0], OSError)
