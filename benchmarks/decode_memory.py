"""Where the decode flow's memory goes: imports, prefetch, writers, the Arrow pool.

The decode flow of ``decode_e2e.py`` (``KafkaSource -> twg.decode -> ParquetSink``,
DLQ to its own sink) against its naive columnar script, on the same records, each
variant in its own process. A thread in the variant's process samples every 20 ms:

* ``VmRSS`` (``/proc/self/status``) — after the imports, after the flow is built, once
  the source's partitions are built (its consumers exist), when the first batch leaves
  the source, and at its peak during the run;
* the bytes pyarrow's memory pool holds (``pa.total_allocated_bytes()``) at the RSS
  peak, and their own peak — the batches, the decoded columns and the writers'
  buffered row groups;
* at the end of the run, glibc's heap (``mallinfo2``): the bytes ``malloc`` hands out
  and the bytes it keeps free — librdkafka, Python and the Parquet writer allocate there;
* with ``--tracemalloc``, the Python heap's peak (slower: run it apart).

Each variant's wall time and CPU (user + system of the whole process) give records/s
and CPU µs a record beside its memory, so that a setting that saves memory shows what
it costs. What is left of the peak RSS after the imports and the Arrow pool is
librdkafka's prefetch (native memory Python and Arrow do not see) and what the
allocators keep. The knobs that move each share are variants of their own:

* ``thalweg-prefetch-16m`` — ``prefetch_budget=16 MiB`` instead of the default;
* ``thalweg-rowgroup-1m`` — ``ParquetSink(row_group_bytes=1 MiB)`` instead of 4 MiB;
* ``thalweg-buffer-64m`` — ``ParquetSink(buffer_bytes=64 MiB)`` instead of 16 MiB: the
  sink's partitions of a worker hold 64 MiB of rows together before the largest buffer
  is written early (the default before); with ``:rk.queued.min.messages=10000`` it
  is the flow at the earlier defaults (one poll queued a partition); any
  ``thalweg-buffer-<N>m`` sets ``buffer_bytes`` to N MiB (``thalweg-buffer-4m``);
* ``thalweg-batch-2k`` — ``batch_size=2000`` instead of 10,000;
* ``thalweg-decode-only`` — no Parquet sink for the decoded rows (``op.inspect``);
* ``thalweg-read-only`` — the source alone: its batches go to ``op.inspect``;
* ``thalweg-mimalloc`` — ``pyarrow.set_memory_pool(mimalloc)`` before the flow is built:
  only what pyarrow's Python calls allocate; the flow on the system allocator for every
  Arrow allocation is ``thalweg:ARROW_DEFAULT_MEMORY_POOL=system``;
* ``imports-*`` — a process that only imports (what each variant starts from).

``--librdkafka '{"max.partition.fetch.bytes": 262144}'`` passes settings to every
thalweg variant's source; ``--env NAME=VALUE`` sets a variable in every variant's
process (``ARROW_DEFAULT_MEMORY_POOL=system``, ``MALLOC_ARENA_MAX=2``). A variant's name
takes its own of either after colons: ``thalweg:MALLOC_ARENA_MAX=2`` sets the variable
for that variant alone, ``thalweg:rk.fetch.max.bytes=1048576`` the librdkafka setting. ``--double``
also runs each variant on twice the records per partition. Repeats alternate the
variants (A B A B ...), so a load change on a shared machine falls on both.

Usage::

    python benchmarks/decode_memory.py --records 480000 --partitions 16 --repeat 2 --double \
        --variants naive,thalweg,thalweg-buffer-64m:rk.queued.min.messages=10000
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _decode_shapes import shape  # noqa: E402
from _harness import COMPRESSIONS, broker, malloc_mb  # noqa: E402

VARIANTS = (
    "imports-naive",
    "imports-thalweg",
    "naive",
    "thalweg",
    "thalweg-prefetch-16m",
    "thalweg-rowgroup-1m",
    "thalweg-buffer-64m",
    "thalweg-buffer-4m",
    "thalweg-batch-2k",
    "thalweg-decode-only",
    "thalweg-read-only",
    "thalweg-mimalloc",
)


def _status_mb(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


class Sampler(threading.Thread):
    """RSS and the Arrow pool every 20 ms; the pool's bytes at the RSS peak."""

    def __init__(self) -> None:
        super().__init__(name="memory-sampler", daemon=True)
        self.halt = threading.Event()
        self.peak_rss = 0.0
        self.arrow_at_peak = 0.0
        self.arrow_peak = 0.0
        self.anon_at_peak = 0.0
        self.malloc_at_peak: dict[str, float] = {}
        self.malloc_in_use_peak = 0.0
        self.series: list[tuple[float, ...]] | None = None
        self._t0 = time.perf_counter()

    def sample(self) -> None:
        import pyarrow as pa

        rss = _status_mb("VmRSS")
        arrow = pa.total_allocated_bytes() / 2**20
        self.arrow_peak = max(self.arrow_peak, arrow)
        malloc = malloc_mb()
        self.malloc_in_use_peak = max(self.malloc_in_use_peak, malloc.get("malloc_in_use_mb", 0))
        if self.series is not None:
            self.series.append(
                (
                    round(time.perf_counter() - self._t0, 2),
                    round(rss),
                    round(malloc.get("malloc_in_use_mb", 0)),
                    round(malloc.get("malloc_free_mb", 0)),
                    round(arrow),
                )
            )
        if rss > self.peak_rss:
            self.peak_rss, self.arrow_at_peak = rss, arrow
            self.anon_at_peak = _status_mb("RssAnon")
            self.malloc_at_peak = malloc

    def run(self) -> None:
        while not self.halt.wait(0.02):
            self.sample()


_STAGES: dict[str, float] = {}


def _flow(name: str, args: argparse.Namespace, out: Path) -> Any:
    """The decode flow of ``decode_e2e.py`` with the variant's one knob turned."""
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow

    import thalweg_bytewax.operators as twg
    from thalweg_bytewax.codecs import AvroCodec
    from thalweg_bytewax.connectors.kafka import KafkaSource
    from thalweg_bytewax.connectors.parquet import ParquetSink
    from thalweg_bytewax.registry import DirectorySchemaSource

    class StagedSource(KafkaSource):
        """Notes the RSS once every listed partition is built (its consumer exists)."""

        def build_part(self, step_id: str, for_part: str, resume_state: Any) -> Any:
            part = super().build_part(step_id, for_part, resume_state)
            _STAGES["parts_built_mb"] = _status_mb("VmRSS")
            return part

    def first_batch(_step: str, _item: object) -> None:
        _STAGES.setdefault("first_batch_mb", _status_mb("VmRSS"))

    shape_ = shape("plain")
    schemas = out / "schemas"
    schemas.mkdir(parents=True, exist_ok=True)
    (schemas / f"{shape_.schema_id}.avsc").write_text(json.dumps(shape_.avro_schema))
    source_args: dict[str, Any] = {"tail": False}
    if args.librdkafka:
        source_args["librdkafka"] = json.loads(args.librdkafka)
    if name == "thalweg-prefetch-16m":
        source_args["prefetch_budget"] = 16 * 2**20
    if name == "thalweg-batch-2k":
        source_args["batch_size"] = 2000
    sink_args: dict[str, Any] = {}
    if name == "thalweg-rowgroup-1m":
        sink_args["row_group_bytes"] = 2**20
    if name.startswith("thalweg-buffer-"):
        sink_args["buffer_bytes"] = int(name.removeprefix("thalweg-buffer-").rstrip("m")) * 2**20
    flow = Dataflow("thalweg_decode")
    raw = op.input(
        "in", flow, StagedSource([args.bootstrap], args.topics.split(","), **source_args)
    )
    op.inspect("first_batch", raw, first_batch)
    if name == "thalweg-read-only":
        return flow
    decoded = twg.decode("decode", raw, AvroCodec(DirectorySchemaSource(schemas)))
    if name == "thalweg-decode-only":
        op.inspect("orders", decoded.ok, lambda _step, _item: None)
    else:
        op.output("orders", decoded.ok, ParquetSink(out / "orders", **sink_args))
    op.output("dlq", decoded.rejected, ParquetSink(out / "dlq"))
    return flow


def run_variant(args: argparse.Namespace) -> dict[str, Any]:
    """One variant in this process: the RSS at each stage and the Arrow pool's share."""
    name: str = args.child
    start = _status_mb("VmRSS")
    if name.endswith("naive"):
        import fastavro  # noqa: F401
        import pyarrow as pa
        import pyarrow.parquet  # noqa: F401
        from confluent_kafka import Consumer  # noqa: F401
    else:
        import bytewax.operators  # noqa: F401
        import pyarrow as pa
        from bytewax.testing import run_main

        import thalweg_bytewax.operators  # noqa: F401
        from thalweg_bytewax.codecs import AvroCodec  # noqa: F401
        from thalweg_bytewax.connectors.kafka import KafkaSource  # noqa: F401
        from thalweg_bytewax.connectors.parquet import ParquetSink  # noqa: F401
    imports = _status_mb("VmRSS")
    result: dict[str, Any] = {"start_mb": start, "imports_mb": imports}
    if name.startswith("imports-"):
        return {**result, "built_mb": imports, "peak_rss_mb": _status_mb("VmHWM")}
    if name == "thalweg-mimalloc":
        pa.set_memory_pool(pa.mimalloc_memory_pool())
    if args.tracemalloc:
        import tracemalloc

        tracemalloc.start()
    out = Path(tempfile.mkdtemp(prefix=f"twg-mem-{name}-"))
    sampler = Sampler()
    if args.series:
        sampler.series = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    try:
        if name == "naive":
            from decode_e2e import _naive

            built = _status_mb("VmRSS")
            sampler.start()
            _naive(
                shape("plain"), "avro", args.bootstrap, args.topics.split(","), out, args.expected
            )
        else:
            flow = _flow(name, args, out)
            built = _status_mb("VmRSS")
            sampler.start()
            run_main(flow)
        sampler.halt.set()
        sampler.join()
        sampler.sample()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    result.update(
        built_mb=built,
        **_STAGES,
        peak_rss_mb=_status_mb("VmHWM"),
        anon_at_peak_mb=sampler.anon_at_peak,
        arrow_at_peak_mb=sampler.arrow_at_peak,
        arrow_peak_mb=sampler.arrow_peak,
        arrow_pool=pa.default_memory_pool().backend_name,
        records_per_s=args.expected / wall,
        cpu_us_per_record=cpu / args.expected * 1e6,
        malloc_in_use_peak_mb=sampler.malloc_in_use_peak,
        **{k.replace("_mb", "_at_peak_mb"): v for k, v in sampler.malloc_at_peak.items()},
        **malloc_mb(),
        end_rss_mb=_status_mb("VmRSS"),
    )
    if sampler.series is not None:
        result["series"] = sampler.series
    if args.tracemalloc:
        result["python_heap_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    return result


_COLUMNS = (
    ("imports", "imports_mb", 8, ".0f"),
    ("parts", "parts_built_mb", 7, ".0f"),
    ("1st", "first_batch_mb", 6, ".0f"),
    ("peak", "peak_rss_mb", 7, ".0f"),
    ("anon", "anon_at_peak_mb", 6, ".0f"),
    ("Arrow@pk", "arrow_at_peak_mb", 9, ".0f"),
    ("m@pk", "malloc_in_use_at_peak_mb", 6, ".0f"),
    ("mfree@pk", "malloc_free_at_peak_mb", 9, ".0f"),
    ("m peak", "malloc_in_use_peak_mb", 7, ".0f"),
    ("mfree end", "malloc_free_mb", 10, ".0f"),
    ("krec/s", "records_per_s", 8, ".0f"),
    ("cpu µs", "cpu_us_per_record", 7, ".2f"),
)


def _row(label: str, r: dict[str, Any]) -> str:
    line = f"{label:<26}"
    for _, key, width, fmt in _COLUMNS:
        value = r.get(key)
        if value is None:
            line += f"{'-':>{width}}"
        else:
            value = value / 1000 if key == "records_per_s" else value
            line += f"{value:>{width}{fmt}}"
    return line


def main() -> None:
    """Produce the records once, run every variant in its own process, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=480_000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--compression", choices=COMPRESSIONS, default="zstd")
    parser.add_argument("--bootstrap", default="", help="a broker; default: the mock cluster")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--double", action="store_true", help="also at 2x the records")
    parser.add_argument("--librdkafka", default="", help="JSON settings for thalweg's source")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for variants")
    parser.add_argument("--tracemalloc", action="store_true", help="also the Python heap")
    parser.add_argument(
        "--series", help="write each run's samples (s, RSS, malloc in use, free, Arrow) here"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--topics", help=argparse.SUPPRESS)
    parser.add_argument("--expected", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_variant(args)))
        return
    from decode_e2e import _produce

    env = dict(os.environ)
    env.update(item.split("=", 1) for item in args.env)
    factors = (1, 2) if args.double else (1,)
    with broker(args.bootstrap) as bootstrap:
        topics, n, size = _produce(
            bootstrap,
            shape("plain"),
            "avro",
            args.records,
            int(time.time()),
            factors,
            partitions=args.partitions,
            compression=args.compression,
        )
        print(f"{n:,} plain Avro records ({size / 2**20:.0f} MB) in {args.partitions} partitions")
        print(f"{'variant':<26}" + "".join(f"{h:>{w}}" for h, _, w, _ in _COLUMNS))
        peaks: dict[str, list[float]] = {}
        for _ in range(args.repeat):
            for name in args.variants.split(","):
                base, *parts = name.split(":")
                own: list[str] = []
                for part in parts:  # a value may hold colons: `_RJEM_MALLOC_CONF=a:1`
                    if "=" in part or not own:
                        own.append(part)
                    else:
                        own[-1] += ":" + part
                variant_env = dict(env)
                rk = json.loads(args.librdkafka or "{}")
                for item in own:
                    key, value = item.split("=", 1)
                    if key.startswith("rk."):
                        rk[key[3:]] = value
                    else:
                        variant_env[key] = value
                for f in factors:
                    argv = [sys.executable, __file__, "--child", base, "--bootstrap", bootstrap]
                    argv += ["--topics", ",".join(topics[f]), "--expected", str(n * f)]
                    argv += ["--librdkafka", json.dumps(rk)] if rk else []
                    argv += ["--tracemalloc"] if args.tracemalloc else []
                    argv += ["--series", args.series] if args.series else []
                    done = subprocess.run(
                        argv, capture_output=True, text=True, check=False, env=variant_env
                    )
                    if done.returncode != 0:
                        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
                    r = json.loads(done.stdout.strip().splitlines()[-1])
                    label = f"{name} {f}x" if args.double else name
                    if args.series:
                        with open(args.series, "a", encoding="utf-8") as series:
                            series.write(json.dumps({"variant": label, **r}) + "\n")
                    peaks.setdefault(label, []).append(r["peak_rss_mb"])
                    print(_row(label, r), flush=True)
        print(
            "median peak RSS MB: "
            + ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in peaks.items())
        )


if __name__ == "__main__":
    main()
