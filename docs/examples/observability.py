r"""The orders flow with metrics, health and traces on, then its endpoints read back.

Runs ``flows.orders`` over its embedded sample (no Kafka needed) with
``observe(port=0)``: the flow process serves ``/health``, ``/ready``, ``/live``,
``/stats`` and ``/metrics`` on a free loopback port. After the bounded run it prints
readiness, each sink's health, the per-stage digest and a few thalweg metrics::

    python docs/examples/observability.py

With a real broker and a fixed port, the same flow needs no code at all::

    THALWEG_HTTP_PORT=9464 THALWEG_BOOTSTRAP_SERVERS=localhost:9092 \
        python -m bytewax.run flows.orders
    curl -s localhost:9464/ready; curl -s localhost:9464/metrics | grep ^thalweg_

``THALWEG_DATA_DIR`` sets the lake directory (default ``thalweg-data``).
"""

from __future__ import annotations

import json
import urllib.request

from bytewax.testing import run_main

from flows.orders import OrdersSettings, build_flow
from thalweg_bytewax.observability import observe, running_server


def fetch(path: str) -> str:
    """GET one endpoint of the flow's observability server."""
    server = running_server()
    assert server is not None
    with urllib.request.urlopen(server.url + path, timeout=10) as resp:  # noqa: S310 - loopback
        return str(resp.read().decode())


def main() -> None:
    """Run the sample orders flow observed, then print what its endpoints say."""
    settings = OrdersSettings.load().model_copy(update={"sample_orders": 2000})
    flow = observe(build_flow(settings), port=0)
    run_main(flow)  # type: ignore[no-untyped-call]

    print("ready:", json.loads(fetch("/ready"))["ready"])
    tree = json.loads(fetch("/health"))
    for name, sink in sorted(tree["components"]["sink"].items()):
        print(f"sink {name}: {sink['status']}, {sink['numbers']['rows_written']} rows written")
    for name, stage in json.loads(fetch("/stats"))["stages"].items():
        print(f"stage {name}: {stage['records']} records in the last 30 s")
    for line in fetch("/metrics").splitlines():
        if line.startswith(("thalweg_rejected_records_total", "thalweg_step_records_in_total")):
            print(line)


if __name__ == "__main__":
    main()
