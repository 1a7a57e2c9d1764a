"""The orders flow, writing what its process pickled to another process when it exits.

``python -m bytewax.run "tests.runtime.orders_crossings_flow:build_flow(ROOT, COUNT)"``
(``-w N``, or ``-i 0|1 -a host:port;host:port``): the bundled orders flow (raw lane,
decode, dedup, validate, SQL, windows, Iceberg tables) over ``COUNT`` sample orders in
``ROOT/data``; at exit each process writes ``ROOT/crossings-<pid>.json``: its pickled
batches and rows, and the rows its sources read.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path
from typing import Any

from bytewax.dataflow import Dataflow

from thalweg_bytewax.dev._orders_sample import SampleOrdersSource
from thalweg_bytewax.flows.orders import OrdersSettings
from thalweg_bytewax.flows.orders import build_flow as build_orders
from thalweg_bytewax.runtime.crossings import crossings

__all__ = ["build_flow"]

_read = [0]


class _CountingSource(SampleOrdersSource):
    """The sample orders, counting the rows this process's partitions emit."""

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> Any:
        part = super().build_part(step_id, for_part, resume_state)
        inner = part.next_batch

        def next_batch() -> list[Any]:
            batches = inner()
            _read[0] += sum((b[1] if isinstance(b, tuple) else b).num_rows for b in batches)
            return batches

        part.next_batch = next_batch  # type: ignore[method-assign]
        return part


def build_flow(root: str, count: int) -> Dataflow:
    """The orders flow over ``count`` sample orders, its crossings written at exit."""

    def write() -> None:
        body = {**crossings().as_dict(), "records_read": _read[0]}
        Path(root, f"crossings-{os.getpid()}.json").write_text(json.dumps(body))

    atexit.register(write)
    settings = OrdersSettings(data_dir=Path(root) / "data", sample_orders=count)
    return build_orders(settings, source=_CountingSource(count))
