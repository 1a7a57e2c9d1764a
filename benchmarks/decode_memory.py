"""Where the decode flow's memory goes: imports, prefetch, writers, the Arrow pool.

The decode flow of ``decode_e2e.py`` (``KafkaSource -> twg.decode -> ParquetSink``,
DLQ to its own sink) against its naive columnar script, on the same records, each
variant in its own process. A thread in the variant's process samples every 20 ms:

* ``VmRSS`` (``/proc/self/status``) — after the imports, after the flow is built, at
  its peak during the run;
* the bytes pyarrow's memory pool holds (``pa.total_allocated_bytes()``) at the RSS
  peak, and their own peak — the batches, the decoded columns and the writers'
  buffered row groups;
* with ``--tracemalloc``, the Python heap's peak (slower: run it apart).

What is left of the peak RSS after the imports and the Arrow pool is librdkafka's
prefetch (native memory Python and Arrow do not see) and what the allocators keep.
The knobs that move each share are variants of their own:

* ``thalweg-prefetch-16m`` — ``prefetch_budget=16 MiB`` (1 MiB a partition of 16)
  instead of 256 MiB (4 MiB, the most a partition takes);
* ``thalweg-rowgroup-1m`` — ``ParquetSink(row_group_bytes=1 MiB)`` instead of 4 MiB;
* ``thalweg-batch-2k`` — ``batch_size=2000`` instead of 10,000 (one poll, and one
  partition's prefetch in records);
* ``thalweg-decode-only`` — no Parquet sink for the decoded rows (``op.inspect``);
* ``imports-*`` — a process that only imports (what each variant starts from).

Usage::

    python benchmarks/decode_memory.py --records 720000 --partitions 16 --compression zstd
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _decode_shapes import shape  # noqa: E402
from _harness import COMPRESSIONS, broker  # noqa: E402

VARIANTS = (
    "imports-naive",
    "imports-thalweg",
    "naive",
    "thalweg",
    "thalweg-prefetch-16m",
    "thalweg-rowgroup-1m",
    "thalweg-batch-2k",
    "thalweg-decode-only",
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

    def sample(self) -> None:
        import pyarrow as pa

        rss = _status_mb("VmRSS")
        arrow = pa.total_allocated_bytes() / 2**20
        self.arrow_peak = max(self.arrow_peak, arrow)
        if rss > self.peak_rss:
            self.peak_rss, self.arrow_at_peak = rss, arrow

    def run(self) -> None:
        while not self.halt.wait(0.02):
            self.sample()


def _flow(name: str, args: argparse.Namespace, out: Path) -> Any:
    """The decode flow of ``decode_e2e.py`` with the variant's one knob turned."""
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow

    import thalweg_bytewax.operators as twg
    from thalweg_bytewax.codecs import AvroCodec
    from thalweg_bytewax.connectors.kafka import KafkaSource
    from thalweg_bytewax.connectors.parquet import ParquetSink
    from thalweg_bytewax.registry import DirectorySchemaSource

    shape_ = shape("plain")
    schemas = out / "schemas"
    schemas.mkdir(parents=True, exist_ok=True)
    (schemas / f"{shape_.schema_id}.avsc").write_text(json.dumps(shape_.avro_schema))
    source_args: dict[str, Any] = {"tail": False}
    if name == "thalweg-prefetch-16m":
        source_args["prefetch_budget"] = 16 * 2**20
    if name == "thalweg-batch-2k":
        source_args["batch_size"] = 2000
    sink_args: dict[str, Any] = {}
    if name == "thalweg-rowgroup-1m":
        sink_args["row_group_bytes"] = 2**20
    flow = Dataflow("thalweg_decode")
    raw = op.input("in", flow, KafkaSource([args.bootstrap], args.topics.split(","), **source_args))
    decoded = twg.decode("decode", raw, AvroCodec(DirectorySchemaSource(schemas)))
    if name == "thalweg-decode-only":
        op.inspect("orders", decoded.ok, lambda _step, _item: None)
    else:
        op.output("orders", decoded.ok, ParquetSink(out / "orders", **sink_args))
    op.output("dlq", decoded.rejected, ParquetSink(out / "dlq"))
    return flow


def run_variant(args: argparse.Namespace) -> dict[str, float]:
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
    result = {"start_mb": start, "imports_mb": imports}
    if name.startswith("imports-"):
        return {**result, "built_mb": imports, "peak_rss_mb": _status_mb("VmHWM")}
    if args.tracemalloc:
        import tracemalloc

        tracemalloc.start()
    out = Path(tempfile.mkdtemp(prefix=f"twg-mem-{name}-"))
    sampler = Sampler()
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
    result.update(
        built_mb=built,
        peak_rss_mb=_status_mb("VmHWM"),
        arrow_at_peak_mb=sampler.arrow_at_peak,
        arrow_peak_mb=sampler.arrow_peak,
        arrow_pool=pa.default_memory_pool().backend_name,
    )
    if args.tracemalloc:
        result["python_heap_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    return result


def main() -> None:
    """Produce the records once, run every variant in its own process, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=720_000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--compression", choices=COMPRESSIONS, default="zstd")
    parser.add_argument("--bootstrap", default="", help="a broker; default: the mock cluster")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--tracemalloc", action="store_true", help="also the Python heap")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--topics", help=argparse.SUPPRESS)
    parser.add_argument("--expected", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_variant(args)))
        return
    from decode_e2e import _produce

    with broker(args.bootstrap) as bootstrap:
        topics, n, size = _produce(
            bootstrap,
            shape("plain"),
            "avro",
            args.records,
            int(time.time()),
            (1,),
            partitions=args.partitions,
            compression=args.compression,
        )
        print(f"{n:,} plain Avro records ({size / 2**20:.0f} MB) in {args.partitions} partitions")
        head = f"{'variant':<22}{'imports':>9}{'built':>8}{'peak RSS':>10}{'Arrow@peak':>12}"
        print(head + f"{'Arrow peak':>12}" + (f"{'Py heap':>9}" if args.tracemalloc else ""))
        for name in args.variants.split(","):
            for _ in range(args.repeat):
                argv = [sys.executable, __file__, "--child", name, "--bootstrap", bootstrap]
                argv += ["--topics", ",".join(topics[1]), "--expected", str(n)]
                argv += ["--tracemalloc"] if args.tracemalloc else []
                done = subprocess.run(argv, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
                r = json.loads(done.stdout.strip().splitlines()[-1])
                line = f"{name:<22}{r['imports_mb']:>9.0f}{r['built_mb']:>8.0f}"
                line += f"{r['peak_rss_mb']:>10.0f}{r.get('arrow_at_peak_mb', 0):>12.0f}"
                line += f"{r.get('arrow_peak_mb', 0):>12.0f}"
                if args.tracemalloc:
                    line += f"{r.get('python_heap_peak_mb', 0):>9.0f}"
                print(line, flush=True)


if __name__ == "__main__":
    main()
