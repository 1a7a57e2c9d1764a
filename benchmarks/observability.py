"""Observability overhead on the orders flow: the same flow with observability off and on.

Produces N sample orders (Confluent-framed Avro) to a local broker, with a W3C
``traceparent`` header on every record, then runs ``flows.orders.build_flow`` over them
(``tail=False``: raw lane, decode, dedup, contract, orders / DLQ / audit lanes), each run
in its own process, alternating:

* ``off`` — observability off (the default; every hook is one ``is None`` check);
* ``on`` — ``observe(port=0)`` with an OpenTelemetry SDK tracer provider (batch span
  processor into an in-memory exporter), the Prometheus reader, the health tree, and a
  thread scraping ``/metrics`` and ``/stats`` every 0.5 s during the run.

Each variant runs ``--repeat`` times; the median records/s is compared. Usage::

    python benchmarks/observability.py --records 60000 --repeat 5

It starts librdkafka's mock cluster unless ``--bootstrap`` names a broker (the mock keeps
~5 MB per partition: 60 000 orders fit one 4-partition topic).
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import json
import resource
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _harness import broker, check_retention, peak_rss_mb, run_child  # noqa: E402


def _variant(bootstrap: str, topic: str, data_dir: str, mode: str) -> dict[str, float]:
    from bytewax.testing import run_main

    from flows.orders import OrdersSettings, build_flow

    scrapes = 0
    stop = threading.Event()
    if mode == "on":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from thalweg_bytewax.observability import observe, running_server

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        observe(port=0, tracing_provider=provider)
        server = running_server()
        assert server is not None

        def scrape() -> None:
            nonlocal scrapes
            while not stop.wait(1.0):
                for path in ("/metrics", "/stats"):
                    with urllib.request.urlopen(server.url + path, timeout=10) as r:  # noqa: S310
                        r.read()
                scrapes += 1

        threading.Thread(target=scrape, daemon=True).start()
    settings = OrdersSettings(
        bootstrap_servers=bootstrap, topic=topic, tail=False, data_dir=Path(data_dir)
    )
    flow = build_flow(settings)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    run_main(flow)  # type: ignore[no-untyped-call]
    elapsed = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    stop.set()
    import pyarrow.dataset as ds

    rows = ds.dataset(Path(data_dir) / "raw", format="parquet").count_rows()
    out: dict[str, float] = {
        "rows": rows,
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "rss_mb": peak_rss_mb(),
    }
    if mode == "on":
        provider.force_flush()
        out["spans"] = len(exporter.get_finished_spans())
        out["scrapes"] = scrapes
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--variant", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(_variant(*args.variant)))
        return

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from thalweg_bytewax.observability import KafkaHeadersSetter
    from thalweg_bytewax.samples import encode_order_avro, order_key, sample_orders
    from thalweg_bytewax.testing import produce

    with broker(args.bootstrap) as bootstrap:
        topic = f"bench-observability-{int(time.time())}"
        upstream = TracerProvider().get_tracer("checkout")

        def records() -> Iterator[dict[str, Any]]:
            for i, order in enumerate(sample_orders(args.records)):
                headers: list[tuple[str, bytes]] = []
                if i % 100 == 0:  # a new upstream trace per 100 orders
                    with upstream.start_as_current_span("checkout"):
                        TraceContextTextMapPropagator().inject(
                            headers, setter=KafkaHeadersSetter()
                        )
                    current = headers
                yield {
                    "key": order_key(order),
                    "value": encode_order_avro(order),
                    "headers": current,
                }

        produce(bootstrap, topic, records())
        check_retention(bootstrap, [topic])
        results: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
        for _ in range(args.repeat):
            for mode in ("off", "on"):
                tmp = tempfile.mkdtemp(prefix=f"twg-obs-{mode}-")
                try:
                    res = run_child(
                        __file__, ["--variant", bootstrap, topic, tmp, mode], name=mode
                    )
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
                if res["rows"] != args.records:
                    raise SystemExit(f"{mode}: raw lane holds {res['rows']} of {args.records}")
                results[mode].append(res)
        rates = {m: [r["rows"] / r["seconds"] for r in rs] for m, rs in results.items()}
        med = {m: statistics.median(v) for m, v in rates.items()}
        per_cpu = {m: [r["rows"] / r["cpu_seconds"] for r in rs] for m, rs in results.items()}
        med_cpu = {m: statistics.median(v) for m, v in per_cpu.items()}
        for mode in ("off", "on"):
            rs = results[mode]
            extra = ""
            if mode == "on":
                extra = (
                    f"  spans/run {statistics.median(r['spans'] for r in rs):.0f}"
                    f"  scrapes/run {statistics.median(r['scrapes'] for r in rs):.0f}"
                )
            print(
                f"{mode:>4}: median {med[mode]:>9,.0f} records/s  "
                f"(runs: {', '.join(f'{v:,.0f}' for v in rates[mode])})  "
                f"peak RSS {max(r['rss_mb'] for r in rs):.0f} MB{extra}"
            )
            print(
                f"      median {med_cpu[mode]:>9,.0f} records per CPU second  "
                f"(runs: {', '.join(f'{v:,.0f}' for v in per_cpu[mode])})"
            )
        overhead = (med["off"] - med["on"]) / med["off"] * 100
        overhead_cpu = (med_cpu["off"] - med_cpu["on"]) / med_cpu["off"] * 100
        print(f"overhead (wall clock): {overhead:+.1f} % of the off throughput (budget: 5 %)")
        print(f"overhead (CPU):        {overhead_cpu:+.1f} % of the off throughput (budget: 5 %)")


if __name__ == "__main__":
    main()
