"""Recovery throughput: ``thalweg recover`` against the live flow on the same path.

Produces N sample orders (Confluent-framed Avro) to a local broker, then times, each in
its own process so peak RSS is per variant:

* ``ingest``  — the whole orders flow from Kafka (raw lane, orders, DLQ, audit), which
                writes the raw lane the recovery reads (context only);
* ``live``    — the live path of the sink being recovered: ``KafkaSource(tail=False)``
                → decode → dedup → contract → SQL → the Iceberg orders table
                (``ice_orders``), every other output removed;
* ``recover`` — ``thalweg recover flows.orders --sink ice_orders`` over a copy of the
                raw lane, into an empty orders table (planning, the retention check and
                the replay through the same path, durable files included). Kafka is
                pointed at a closed port.

Both timed variants run one worker with 5 s epochs. The target is ``recover`` ≥ 0.8×
``live`` records/s.

Usage::

    python benchmarks/recover.py --records 56000
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))
_sys.path.insert(0, str(_Path(__file__).parents[1]))

import argparse
import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

from _harness import broker, check_retention, peak_rss_mb, run_child  # noqa: E402

EPOCH_S = 5.0


def _settings(data: str, bootstrap: str, topic: str):  # type: ignore[no-untyped-def]
    from flows.orders import OrdersSettings

    return OrdersSettings(
        data_dir=Path(data), bootstrap_servers=bootstrap, topic=topic, tail=False
    )


def _run(flow) -> None:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    from bytewax.run import cli_main

    cli_main(flow, epoch_interval=timedelta(seconds=EPOCH_S))


def variant_ingest(data: str, bootstrap: str, topic: str) -> dict[str, float]:
    from flows.orders import build_flow
    from thalweg_bytewax.connectors.kafka import KafkaSource

    settings = _settings(data, bootstrap, topic)
    flow = build_flow(settings, source=KafkaSource(bootstrap, [topic], tail=False))
    t0 = time.perf_counter()
    _run(flow)
    return {"seconds": time.perf_counter() - t0}


def variant_live(data: str, bootstrap: str, topic: str) -> dict[str, float]:
    from flows.orders import build_flow
    from thalweg_bytewax.connectors.kafka import KafkaSource
    from thalweg_bytewax.connectors.raw_lane_source import only_output

    settings = _settings(data, bootstrap, topic)
    flow = build_flow(settings, source=KafkaSource(bootstrap, [topic], tail=False))
    flow = only_output(flow, "ice_orders")
    t0 = time.perf_counter()
    _run(flow)
    return {"seconds": time.perf_counter() - t0}


def variant_recover(data: str, bootstrap: str, topic: str) -> dict[str, float]:
    os.environ.update(
        THALWEG_DATA_DIR=data, THALWEG_TOPIC=topic, THALWEG_BOOTSTRAP_SERVERS=bootstrap
    )
    import flows.orders  # noqa: F401 - imported before the clock, as the live variants do
    from thalweg_bytewax.cli import main

    argv = ["recover", "flows.orders", "--sink", "ice_orders", "--no-progress"]
    t0 = time.perf_counter()
    rc = main([*argv, "--epoch-s", str(EPOCH_S)])
    seconds = time.perf_counter() - t0
    if rc != 0:
        raise SystemExit(f"recover exited {rc}")
    return {"seconds": seconds}


def _child(name: str, data: str, bootstrap: str, topic: str) -> None:
    fn = {"ingest": variant_ingest, "live": variant_live, "recover": variant_recover}[name]
    result = fn(data, bootstrap, topic)
    result["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(result))


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _forget(store: Path, sink: str) -> None:
    """Drop a sink's rows from a copied store: its lane starts empty."""
    import sqlite3

    with sqlite3.connect(store) as conn:
        conn.execute("DELETE FROM coverage WHERE sink=?", (sink,))


def _rows(data: Path) -> int:
    """The rows of the orders table the flow wrote under ``data``."""
    from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig

    catalog = IcebergCatalogConfig(warehouse=str(data / "warehouse")).load()
    return int(catalog.load_table("sales.orders").scan().to_arrow().num_rows)


def main() -> None:
    """Produce, ingest, then time the live path and the recovery of the orders table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=56_000)
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--child", nargs=4, metavar=("VARIANT", "DATA", "BOOTSTRAP", "TOPIC"))
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    from thalweg_bytewax.testing import produce_sample_orders

    work = Path(tempfile.mkdtemp(prefix="twg-recover-bench-"))
    topic = f"recover-bench-{int(time.time())}"
    try:
        with broker(args.bootstrap) as bootstrap:
            produce_sample_orders(bootstrap, topic, args.records)
            check_retention(bootstrap, [topic])
            me = str(Path(__file__))
            ingest = run_child(me, ["--child", "ingest", str(work / "a"), bootstrap, topic],
                               name="ingest")
            live = run_child(me, ["--child", "live", str(work / "b"), bootstrap, topic],
                             name="live")
            (work / "c").mkdir()
            shutil.copytree(work / "a" / "raw", work / "c" / "raw")
            _forget(work / "c" / "raw" / "_coverage.sqlite3", "orders.ice_orders")
            recover = run_child(
                me, ["--child", "recover", str(work / "c"), _closed_port(), topic],
                name="recover",
            )
        rows = _rows(work / "a")
        assert _rows(work / "b") == rows == _rows(work / "c")
        print(f"{args.records:,} records ({rows:,} clean orders), 1 worker, {EPOCH_S:g} s epochs")
        for name, r in (("ingest", ingest), ("live", live), ("recover", recover)):
            rate = args.records / r["seconds"]
            print(
                f"{name:<8} {r['seconds']:7.2f} s  {rate:>10,.0f} records/s  "
                f"peak RSS {r['peak_rss_mb']:.0f} MB"
            )
        ratio = live["seconds"] / recover["seconds"]
        print(f"recover / live: {ratio:.2f}x (target >= 0.8x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
