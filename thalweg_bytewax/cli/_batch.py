"""``thalweg batch CONFIG``: a pipeline configuration run over files, exactly once per row.

The configuration's source is forced to files (``--files`` replaces its paths); each
file is one partition whose state is the next row index, and the run keeps a Bytewax
recovery directory under the data directory (``<data_dir>/.batch/<name>``). A run that
is killed resumes where its last completed epoch stopped when the same command runs
again, and the sinks skip what they already hold (coverage by file and row), so every
row lands once. A finished file stays finished: a rerun reads only new files.

The run ends with the flows' own summary (``thalweg_bytewax.pipeline._summary.RunReport``):
rows read, rejects by reason, audit verdicts, then per sink the rows its table or lane holds and
the rows this run added, the dead-letter lane likewise; a rerun with nothing new says so
in one line.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from thalweg_bytewax.cli._common import Progress
from thalweg_bytewax.cli._subcommand import add_subcommand
from thalweg_bytewax.errors import ConfigError

__all__ = ["BATCH_STATE_DIR", "add_commands"]

BATCH_STATE_DIR = ".batch"
"""The directory under ``data_dir`` that holds each pipeline's batch recovery store."""


class _Tally:
    """Rows read per file, from the flow's input stream: the progress bar and file count."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.read: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add_read(self, key: str, rows: int) -> None:
        with self._lock:
            self.read[key] += rows
            self.progress.update(key, self.read[key])


def _tally_sink(tally: _Tally) -> Any:
    from bytewax.outputs import DynamicSink, StatelessSinkPartition

    class _Part(StatelessSinkPartition[Any]):
        def write_batch(self, items: list[Any]) -> None:
            for key, batch in items:
                tally.add_read(key, batch.num_rows)

    class _Sink(DynamicSink[Any]):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> _Part:
            return _Part()

    return _Sink()


def _parquet_rows(paths: list[str]) -> int | None:
    """Rows of the files up front, where their footers say (Parquet); else None."""
    import glob

    import pyarrow.parquet as pq

    total = 0
    for entry in paths:
        for path in sorted(glob.glob(entry)) or [entry]:
            if not path.endswith((".parquet", ".pq")):
                return None
            total += pq.ParquetFile(path).metadata.num_rows
    return total


def _batch(args: argparse.Namespace) -> int:  # noqa: PLR0914 - one command, read top down
    """Run a pipeline configuration over files, exactly once per row.

    Run a pipeline configuration (TOML) with its source forced to files: one partition per file,
    resumable by file and row through a recovery directory under the data directory, so a killed run
    resumes and every row lands once.
    """
    from bytewax.recovery import RecoveryConfig, init_db_dir
    from bytewax.run import cli_main

    from thalweg_bytewax.pipeline import PipelineConfig
    from thalweg_bytewax.pipeline._summary import RunReport
    from thalweg_bytewax.pipeline.build import build_pipeline
    from thalweg_bytewax.runtime.placement import cluster_declared
    from thalweg_bytewax.runtime.state_keys import recovery_declared

    overrides = list(args.set)
    if args.files:
        overrides += ["source.kind=files", "source.paths=" + ",".join(args.files)]
    if args.format:
        overrides.append(f"source.format={args.format}")
    config = PipelineConfig.load(args.config, overrides=overrides)
    if config.source.kind != "files":
        msg = (
            f"batch: `{args.config}` expected a files source; got {config.source.kind!r}; "
            "name the files with `--files PATH_OR_GLOB`"
        )
        raise ConfigError(msg)
    recovery = Path(args.recovery_dir or config.under(Path(BATCH_STATE_DIR) / config.name))
    resumed = recovery.is_dir() and any(recovery.iterdir())
    if not resumed:
        recovery.mkdir(parents=True, exist_ok=True)
        init_db_dir(recovery, 1)  # type: ignore[no-untyped-call]  # bytewax is untyped
    base = Path(args.config).resolve().parent
    total = _parquet_rows(config.source.paths)
    enabled = args.progress and sys.stderr.isatty()
    # The flows' end-of-run summary, printed here once the run is over.
    report = RunReport(
        f"batch `{config.name}`" + (" (resumed)" if resumed else ""),
        config.under(config.raw_lane.path),
        [],
        at_exit=False,
    )
    with Progress(total or 0, enabled=enabled, title=f"batch {config.name}") as progress:
        tally = _Tally(progress)
        taps = {"read": lambda: _tally_sink(tally)}
        flow = build_pipeline(config, base_dir=base, summary=report, taps=taps)
        with (
            cluster_declared(workers_per_process=args.workers or 1),
            recovery_declared(recovery),
        ):
            cli_main(  # type: ignore[no-untyped-call]  # bytewax.run is untyped
                flow,
                workers_per_process=args.workers,
                epoch_interval=timedelta(seconds=args.epoch_s),
                recovery_config=RecoveryConfig(str(recovery)),  # type: ignore[no-untyped-call]
            )
    for line in report.lines():
        print(line)
    files = f"{len(tally.read):,} file{'' if len(tally.read) == 1 else 's'} read"
    print(f"  {files}; lanes under {config.data_dir}; a rerun resumes from {recovery}")
    return 0


def add_commands(sub: Any) -> None:
    """Add ``batch`` to the CLI's subparsers."""
    batch = add_subcommand(sub, "batch", _batch)
    batch.add_argument("config", help="the pipeline TOML (thalweg init writes one)")
    batch.add_argument(
        "--files", nargs="+", metavar="PATH", help="files, globs or URLs (replace the config's)"
    )
    batch.add_argument("--format", help="parquet, csv, ndjson, avro, ipc, excel or xml")
    batch.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a key"
    )
    batch.add_argument(
        "--recovery-dir", help=f"the recovery store (default: <data_dir>/{BATCH_STATE_DIR}/<name>)"
    )
    batch.add_argument("--epoch-s", type=float, default=2.0, help="seconds per epoch")
    batch.add_argument("--workers", type=int, default=1, help="worker threads")
    batch.add_argument(
        "--no-progress", dest="progress", action="store_false", help="print no progress line"
    )
