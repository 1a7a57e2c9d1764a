"""Observability overhead on the orders flow: the same flow with observability off and on.

Produces N sample orders (Confluent-framed Avro) to a local broker, with a W3C
``traceparent`` header on every record, then runs ``flows.orders.build_flow`` over them
(``tail=False``: raw lane, decode, dedup, contract, orders / DLQ / audit lanes), each run
in its own process, alternating (``off, on`` then ``on, off``, so neither variant always
runs second):

* ``off`` — observability off (the default; every hook is one ``is None`` check);
* ``on`` — ``observe(port=0)`` with an OpenTelemetry SDK tracer provider (its default
  ``ParentBased(ALWAYS_ON)`` sampler, so every batch is traced; batch span processor into
  an exporter that counts the spans and drops them, as a real exporter does once they
  are sent), the Prometheus reader, the health tree, and a thread scraping ``/metrics``
  and ``/stats`` every second during the run. ``observe(freeze_gc=True)`` freezes the
  objects alive at its call (``gc.freeze()``);
* ``off+freeze`` (with ``--freeze-reference``) — observability off, ``gc.freeze()``
  called where ``on`` calls ``observe()``: what the freeze alone saves, so that ``on``
  against it is the cost of observability without that saving.

Each variant runs ``--repeat`` times; reported per variant are records/s (wall clock),
CPU µs per record (user + system of the whole process, every thread) and the CPU time
the cyclic garbage collector took (the collecting thread's CPU clock, so a loaded
machine does not inflate it; full collections counted apart: one more or fewer of
them moves a short run by several per cent): median and min–max. ``--batch-size``
makes the Kafka polls smaller (more batches, so the per-batch hooks weigh more).
``--hooks ROUNDS`` times the hooks alone (no flow) on the topic's 1,000-record
RawBatches, CPU per batch: off, metrics and health only, and every batch traced.
``--profile`` also runs each variant once under cProfile and reports
the hooks' time per batch against the flow's time per batch, and the CPU cost of one
scrape — the evidence that still holds when neighbours make the timings noisy. Usage::

    python benchmarks/observability.py --records 60000 --repeat 7 --profile

It starts librdkafka's mock cluster unless ``--bootstrap`` names a broker (the mock keeps
~5 MB per partition: 60 000 orders fit one 4-partition topic).
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import gc
import json
import resource
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from _harness import broker, check_retention, peak_rss_mb, run_child  # noqa: E402

# The hooks the flow calls per batch (each returns before the next starts: no nesting).
HOOKS = (
    ("gate.py", "observe_step"),  # opens a step's batch (span, timer)
    ("hooks.py", "finish"),  # records a step's batch
    ("hooks.py", "polled"),  # a source poll
    ("hooks.py", "writing"),  # a sink write
    ("hooks.py", "committed"),  # an epoch commit
)
BATCHES = ("decoding.py", "run")  # one call per decoded batch (a source batch)


class _GcClock:
    """CPU time spent in the cyclic garbage collector, and the full collections.

    The collecting thread's CPU clock (a collection runs in one thread, holding the
    GIL): a wall clock would also count the time the thread waited for a core.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._start: dict[int, float] = {}

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        me = threading.get_ident()
        if phase == "start":
            self._start[me] = time.thread_time()
            return
        self.seconds += time.thread_time() - self._start.pop(me, time.thread_time())
        self.full += info["generation"] == 2


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _hook_profile(prof: Any, elapsed: float) -> dict[str, float]:
    """From a cProfile of the run: batches, and hook / flow seconds (profiled)."""
    import pstats

    stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    hooks = 0.0
    batches = 0
    for (path, _, fn), (_, ncalls, _, cumtime, _) in stats.items():
        where = path.replace("\\", "/")
        if any(where.endswith(f"observability/{f}") and fn == n for f, n in HOOKS):
            hooks += cumtime
        if where.endswith(f"operators/{BATCHES[0]}") and fn == BATCHES[1]:
            batches += ncalls
    return {"profiled_batches": batches, "profiled_hooks_s": hooks, "profiled_run_s": elapsed}


def _variant(bootstrap: str, topic: str, data_dir: str, mode: str, opts: str) -> dict[str, float]:
    from bytewax.testing import run_main

    from flows.orders import OrdersSettings, build_flow
    from thalweg_bytewax.connectors.kafka import KafkaSource

    batch_size, profile = (int(x) for x in opts.split(","))
    scrapes = 0
    stop = threading.Event()
    server: Any = None
    if mode == "on":
        from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        from thalweg_bytewax.observability import observe, running_server

        class Counting(SpanExporter):
            def __init__(self) -> None:
                self.spans = 0

            def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
                self.spans += len(spans)
                return SpanExportResult.SUCCESS

        exporter = Counting()
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        observe(port=0, tracing_provider=provider, freeze_gc=True)
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
    elif mode == "off+freeze":
        gc.freeze()  # where `on` calls observe(freeze_gc=True), which freezes
    settings = OrdersSettings(
        bootstrap_servers=bootstrap, topic=topic, tail=False, data_dir=Path(data_dir)
    )
    source = (
        KafkaSource(bootstrap, [topic], tail=False, batch_size=batch_size)
        if batch_size
        else KafkaSource(bootstrap, [topic], tail=False)
    )
    flow = build_flow(settings, source=source)
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    gc_clock = _GcClock()
    gc.callbacks.append(gc_clock)
    cpu0 = _cpu()
    start = time.perf_counter()
    run_main(flow)  # type: ignore[no-untyped-call]
    elapsed = time.perf_counter() - start
    cpu = _cpu() - cpu0
    gc.callbacks.remove(gc_clock)
    stop.set()
    import pyarrow.dataset as ds

    rows = ds.dataset(Path(data_dir) / "raw", format="parquet").count_rows()
    out: dict[str, float] = {
        "rows": rows,
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "gc_seconds": gc_clock.seconds,
        "gc_full": gc_clock.full,
        "rss_mb": peak_rss_mb(),
    }
    if prof is not None:
        prof.disable()
        out.update(_hook_profile(prof, elapsed))
    if mode == "on":
        provider.force_flush()
        out["spans"] = exporter.spans
        out["scrapes"] = scrapes
        if profile:  # the CPU of one scrape (client and server side), the flow idle
            n = 20
            c0 = _cpu()
            for _ in range(n):
                for path in ("/metrics", "/stats"):
                    with urllib.request.urlopen(server.url + path, timeout=10) as r:  # noqa: S310
                        r.read()
            out["scrape_cpu_ms"] = (_cpu() - c0) / n * 1000
    return out


def _hooks_variant(bootstrap: str, topic: str, mode: str, rounds: str) -> dict[str, float]:
    """CPU µs per source batch of the hooks alone, on the topic's real RawBatches.

    Per batch: the source's ``polled`` (receive span, links, histogram, lag), a decode
    and a validate step (span, stamp, counters, histograms), the raw lane's write (span)
    and four untraced sink writes: what the flow's hooks do, without the flow.
    """
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from thalweg_bytewax.connectors.kafka import KafkaSource
    from thalweg_bytewax.observability import gate, observe
    from thalweg_bytewax.observability.tracing import without_trace

    source = KafkaSource(bootstrap, [topic], tail=False, batch_size=1000)
    batches: list[Any] = []
    reader = source.build_part("kafka_source", f"{topic}:0", None)
    try:
        while True:
            batches.extend(batch for _, batch in reader.next_batch())
    except StopIteration:
        pass
    finally:
        reader.close()

    class Dropping(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    if mode != "off":
        observe(tracing_provider=provider if mode == "traced" else None)
    part = source.build_part("kafka_source", f"{topic}:1", None)
    polled = part._obs  # noqa: SLF001 - the partition's own hooks

    class Counters:
        rows_written = 0
        rows_skipped_replay = 0
        epochs_committed = 0

    sinks = [
        gate.observe_sink_partition(f"lane{i}", f"lane{i}", Counters(), dict, critical=i == 0)
        for i in range(5)
    ]

    def one(raw: Any) -> None:
        out = [("key", raw)]
        if polled is not None:
            out = polled.polled(out, next_offset=1, degraded=False)
        batch = out[0][1]
        step = gate.observe_step("decode", "decode", batch)
        decoded = batch.select(list(range(6, batch.num_columns))).replace_schema_metadata(None)
        if step is not None:
            decoded = step.finish(decoded, None)
        step = gate.observe_step("validate", "validate", decoded)
        if step is not None:
            decoded = step.finish(decoded, None)
        for i, sink in enumerate(sinks):
            if sink is not None:
                sink.writing([batch] if i == 0 else [without_trace(decoded)])

    per_batch = []
    for _ in range(int(rounds)):
        gc.collect()
        c0 = time.process_time()
        for raw in batches:
            one(raw)
        per_batch.append((time.process_time() - c0) / len(batches) * 1e6)
    part.close()
    provider.shutdown()
    return {
        "batches": len(batches),
        "min": min(per_batch),
        "median": statistics.median(per_batch),
        "max": max(per_batch),
    }


def _spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}–{max(values):{fmt}})"


def _overhead(med: dict[str, float], base: str, *, lower_is_better: bool = True) -> float:
    sign = 1 if lower_is_better else -1
    return sign * (med["on"] - med[base]) / med[base] * 100


def _report(results: dict[str, list[dict[str, float]]]) -> None:
    rates = {m: [r["rows"] / r["seconds"] for r in rs] for m, rs in results.items()}
    us = {m: [r["cpu_seconds"] / r["rows"] * 1e6 for r in rs] for m, rs in results.items()}
    no_gc = {
        m: [(r["cpu_seconds"] - r["gc_seconds"]) / r["rows"] * 1e6 for r in rs]
        for m, rs in results.items()
    }
    print(f"runs per variant: {len(rates['off'])}")
    for mode in results:
        rs = results[mode]
        extra = ""
        if mode == "on":
            extra = (
                f"  spans/run {statistics.median(r['spans'] for r in rs):.0f}"
                f"  scrapes/run {statistics.median(r['scrapes'] for r in rs):.0f}"
            )
        print(
            f"{mode:>10}: records/s {_spread(rates[mode], ',.0f')}   "
            f"CPU µs/record {_spread(us[mode], '.2f')}   "
            f"without GC {_spread(no_gc[mode], '.2f')}   "
            f"peak RSS {max(r['rss_mb'] for r in rs):.0f} MB{extra}"
        )
        print(
            f"            GC CPU ms/run {_spread([r['gc_seconds'] * 1000 for r in rs], '.0f')}   "
            f"full collections/run {_spread([r['gc_full'] for r in rs], '.0f')}"
        )
    med = {m: statistics.median(v) for m, v in rates.items()}
    med_us = {m: statistics.median(v) for m, v in us.items()}
    med_no_gc = {m: statistics.median(v) for m, v in no_gc.items()}
    for base in [m for m in results if m != "on"]:
        wall = _overhead(med, base, lower_is_better=False)
        cpu = _overhead(med_us, base)
        cpu_no_gc = _overhead(med_no_gc, base)
        print(f"on against {base}:")
        print(f"  overhead, wall clock (median records/s):      {wall:+.1f} % (budget: 5 %)")
        print(f"  overhead, CPU per record (median):            {cpu:+.1f} % (budget: 5 %)")
        print(f"  overhead, CPU per record without GC (median): {cpu_no_gc:+.1f} %")
        # Round by round (the variants of a round ran back to back): drift cancels.
        paired = [
            (a["cpu_seconds"] / a["rows"]) / (b["cpu_seconds"] / b["rows"]) * 100 - 100
            for a, b in zip(results["on"], results[base], strict=True)
        ]
        print(
            "  overhead, CPU per record, paired by round:   "
            f"{statistics.median(paired):+.1f} % (min {min(paired):+.1f}, max {max(paired):+.1f})"
        )


def _report_profile(prof: dict[str, dict[str, float]]) -> None:
    print("profiled run (cProfile; inflates Python-heavy hooks more than Arrow work):")
    for mode in ("off", "on"):
        p = prof[mode]
        n = max(p["profiled_batches"], 1)
        print(
            f"{mode:>4}: {p['profiled_batches']:.0f} source batches, "
            f"flow {p['profiled_run_s'] / n * 1e6:,.0f} µs/batch, "
            f"hooks {p['profiled_hooks_s'] / n * 1e6:,.1f} µs/batch "
            f"({p['profiled_hooks_s'] / p['profiled_run_s'] * 100:.2f} % of the run)"
        )
    scrape = prof["on"].get("scrape_cpu_ms")
    if scrape is not None:
        print(
            f"one scrape of /metrics + /stats: {scrape:.2f} ms CPU "
            f"({scrape / 10:.2f} % of a core at one scrape per second)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=0, help="records per Kafka poll")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--freeze-reference",
        action="store_true",
        help="also run `off` with gc.freeze() where `on` calls observe()",
    )
    parser.add_argument("--bootstrap", default="")
    parser.add_argument(
        "--hooks",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="also time the hooks alone on 1,000-record RawBatches (CPU per batch)",
    )
    parser.add_argument("--variant", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--hooks-variant", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hooks_variant:
        print(json.dumps(_hooks_variant(*args.hooks_variant)))
        return
    if args.variant:
        print(json.dumps(_variant(*args.variant)))
        return

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from thalweg_bytewax.dev.samples import encode_order_avro, order_key, sample_orders
    from thalweg_bytewax.observability import KafkaHeadersSetter
    from thalweg_bytewax.testing import produce

    with broker(args.bootstrap) as bootstrap:
        topic = f"bench-observability-{int(time.time())}"
        upstream = TracerProvider().get_tracer("checkout")

        def records() -> Iterator[dict[str, Any]]:
            for i, order in enumerate(sample_orders(args.records)):
                headers: list[tuple[str, bytes]] = []
                if i % 100 == 0:  # a new upstream trace per 100 orders
                    with upstream.start_as_current_span("checkout"):
                        TraceContextTextMapPropagator().inject(headers, setter=KafkaHeadersSetter())
                    current = headers
                yield {
                    "key": order_key(order),
                    "value": encode_order_avro(order),
                    "headers": current,
                }

        produce(bootstrap, topic, records())
        check_retention(bootstrap, [topic])

        def run(mode: str, profile: bool) -> dict[str, float]:
            tmp = tempfile.mkdtemp(prefix=f"twg-obs-{mode}-")
            opts = f"{args.batch_size},{int(profile)}"
            try:
                res = run_child(
                    __file__, ["--variant", bootstrap, topic, tmp, mode, opts], name=mode
                )
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            if res["rows"] != args.records:
                raise SystemExit(f"{mode}: raw lane holds {res['rows']} of {args.records}")
            return res

        modes = ("off", "on", "off+freeze") if args.freeze_reference else ("off", "on")
        results: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
        for i in range(args.repeat):
            for mode in modes if i % 2 == 0 else modes[::-1]:
                results[mode].append(run(mode, False))
        if args.repeat:
            _report(results)
        if args.profile:
            _report_profile({mode: run(mode, True) for mode in ("off", "on")})
        if args.hooks:
            print("the hooks alone, CPU µs per 1,000-record source batch, median (min–max):")
            for mode in ("off", "metrics", "traced"):
                r = run_child(
                    __file__,
                    ["--hooks-variant", bootstrap, topic, mode, str(args.hooks)],
                    name=f"hooks {mode}",
                )
                print(
                    f"{mode:>8}: {r['median']:.0f} ({r['min']:.0f}–{r['max']:.0f}) "
                    f"over {r['batches']:.0f} batches"
                )


if __name__ == "__main__":
    main()
