"""Reads one format's fuzz corpus through FileSource under an address-space cap.

Run by tests/connectors/files/test_files_fuzz.py in its own process:

    python -m tests.connectors.files.files_fuzz_child FORMAT CAP_MB

Each file is read whole through FileSource's partition (every batch, every DLQ row);
one JSON line per file says how it ended: ``read`` (rows and DLQ rows), ``source_error``
(a clear ``SourceError``) or ``crash`` (any other exception, with its type). A last
line gives the process's peak resident memory. An allocation the cap refuses is a
``MemoryError`` (reported as a crash) or an abort (the parent sees the signal).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

import pyarrow as pa

from thalweg_bytewax.connectors.files import FileLimits, FileSource
from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.lanes.dlq import dlq_schema

CORPUS = Path(__file__).resolve().parent / "files_corpus"
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)
LIMITS = FileLimits(
    max_line_bytes=256 << 10,
    max_decompressed_bytes=16 << 20,
    max_block_bytes=1 << 20,
    max_block_records=100_000,
    max_cells=200_000,
    max_sheet_bytes=4 << 20,
    max_piece_bytes=64 << 20,
)
"""Small bounds, so a small corpus exceeds them; every attack also runs with defaults."""
_FORMATS = {"csv": "csv", "ndjson": "ndjson", "avro": "avro", "xlsx": "excel",
            "parquet": "parquet", "ipc": "ipc"}


def _vm_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def read(path: Path, fmt: str | None, schema: object, limits: FileLimits) -> dict[str, object]:
    """Read one file whole; how it ended."""
    src = FileSource(str(path), format=fmt, schema=schema, limits=limits)
    ok = bad = 0
    dlq = dlq_schema()
    messages: list[str] = []
    try:
        for key in src.list_parts():
            part = src.build_part("fuzz", key, None)
            try:
                while True:
                    for _, batch in part.next_batch():
                        if batch.schema.equals(dlq):
                            bad += batch.num_rows
                            messages += batch.column("message").to_pylist()[:2]
                        else:
                            ok += batch.num_rows
            except StopIteration:
                pass
            finally:
                part.close()
    except SourceError as exc:
        return {"outcome": "source_error", "message": str(exc)[:300]}
    except Exception as exc:  # noqa: BLE001 - every other exception is what we look for
        return {"outcome": "crash", "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    return {"outcome": "read", "rows": ok, "dlq": bad, "messages": messages[:2]}


def main() -> None:
    name, cap_mb = sys.argv[1], int(sys.argv[2])
    cap = _vm_kb("VmSize:") * 1024 + (cap_mb << 20)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    fmt = _FORMATS.get(name)
    for i, path in enumerate(sorted((CORPUS / name).iterdir())):
        runs = [("fuzz", LIMITS)] + ([("default", FileLimits())] if "attack" in path.name else [])
        for label, limits in runs:
            schema: object = SCHEMA if i % 2 else "infer"
            t = time.perf_counter()
            result = read(path, fmt, schema, limits)
            result.update(file=path.name, limits=label, seconds=round(time.perf_counter() - t, 3))
            print(json.dumps(result), flush=True)
    print(json.dumps({"peak_rss_mb": _vm_kb("VmHWM:") // 1024}), flush=True)


if __name__ == "__main__":
    main()
