"""The native JSON reader against another build of it, in one process, alternated.

A change to ``thalweg_bytewax/codecs/_json_native.c`` moves the reader by a few percent,
well inside what separate runs on a shared 2-core machine scatter by. This loads the
installed build and another one (``--other``, a copy of the ``.so`` from before the
change) into one process and times them in turns on the same batches, so a slow spell
hits both; which build goes first alternates. Per round, each build reads every batch
three times, keeping the last 16 results alive as a flow does until its writer is done
with them. The figure is thread CPU (user + system) per record; "cheaper in" counts the
rounds the installed build won.

Usage::

    cp thalweg_bytewax/codecs/_json_native.*.so /tmp/before.so   # before the change
    # ... change the C source, then: python setup.py build_ext --inplace
    python benchmarks/json_reader_ab.py --other /tmp/before.so --shape plain --shape sample
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import collections
import importlib.util
import statistics
import time
from types import ModuleType
from typing import Any

import pyarrow as pa
from _decode_shapes import SHAPES, shape  # noqa: E402


def _load(path: str) -> ModuleType:
    """A build of the extension from ``path``, beside the installed one."""
    spec = importlib.util.spec_from_file_location("thalweg_bytewax.codecs._json_native", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load an extension from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reader(wire: pa.Schema, build: ModuleType | None) -> object:
    """A ``NativeReader`` whose decoder comes from ``build`` (None: the installed one)."""
    import thalweg_bytewax.codecs._json_fast as fast

    installed = fast._json_native  # noqa: SLF001 - the module under comparison
    if installed is None:
        raise SystemExit("the native JSON reader is not built: pip install -e .")
    fast._json_native = build or installed  # noqa: SLF001
    try:
        return fast.NativeReader(wire, strict=False, prefix="_twg_")
    finally:
        fast._json_native = installed  # noqa: SLF001


def _measure(name: str, other: ModuleType, rows: int, rounds: int) -> None:
    shape_ = shape(name)
    values = [shape_.encode(o, "json") for o in shape_.orders(rows * 8, seed=3)]
    batches = [pa.array(values[i * rows : (i + 1) * rows], pa.binary()) for i in range(8)]
    wire = shape_.arrow_schema("json")
    readers: dict[str, Any] = {"installed": _reader(wire, None), "other": _reader(wire, other)}
    times: dict[str, list[float]] = {label: [] for label in readers}
    for round_ in range(rounds):
        order = list(readers.items())
        for label, reader in order if round_ % 2 else order[::-1]:  # who goes first alternates
            alive: collections.deque[object] = collections.deque(maxlen=16)
            start = time.thread_time()
            for _ in range(3):
                for batch in batches:
                    alive.append(reader.read(batch))
            alive.clear()
            times[label].append((time.thread_time() - start) / (3 * 8 * rows) * 1e6)
    mine, theirs = times["installed"], times["other"]
    wins = sum(a < b for a, b in zip(mine, theirs, strict=True))
    print(
        f"{name:<8} {rows:>6}-row batches  other {min(theirs):.3f} / "
        f"{statistics.median(theirs):.3f}  installed {min(mine):.3f} / "
        f"{statistics.median(mine):.3f} us a record (min / median), installed cheaper in "
        f"{wins}/{rounds}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", required=True, help="the .so of the build to compare with")
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES))
    parser.add_argument("--rows", type=int, action="append", help="rows a batch (10,000)")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    other = _load(args.other)
    for name in args.shape or ["plain"]:
        for rows in args.rows or [10_000]:
            _measure(name, other, rows, args.rounds)


if __name__ == "__main__":
    main()
