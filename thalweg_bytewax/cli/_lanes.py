"""The lane, recovery (check, migrate-keys), check, coverage and recover commands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from thalweg_bytewax.cli._common import Progress, load_flow, output_ids
from thalweg_bytewax.cli._subcommand import add_command_group, add_subcommand
from thalweg_bytewax.errors import ConfigError

__all__ = ["add_commands"]


def _lane_stats(args: argparse.Namespace) -> int:
    """Records per topic-partition."""
    from thalweg_bytewax.lanes.read import lane_stats

    stats = lane_stats(args.path)
    for r in stats.to_pylist():
        missing = r["missing_offsets"]
        print(
            f"{r['topic']}:{r['partition']}  {r['records']:,} records, offsets "
            f"{r['first_offset']}..{r['last_offset']}"
            + (f" ({missing:,} offsets not in the lane)" if missing else "")
        )
    total = sum(stats.column("records").to_pylist())
    print(f"total: {total:,} records")
    return 0


def _recovery_check(args: argparse.Namespace) -> int:
    """Check that a flow can resume from a recovery directory.

    Refuse a recovery directory holding state for partitions the flow no longer lists (a topic
    removed from a source), naming the step and the partitions.
    """
    from thalweg_bytewax.runtime.recovery import check_recovery_store

    flow = load_flow("recovery check", args.flow)
    check_recovery_store(flow, args.directory)
    print(f"recovery store {args.directory}: every stored partition is listed by the flow")
    return 0


def _recovery_migrate_keys(args: argparse.Namespace) -> int:
    """Move dedup and windowed-unique state to routing keys (the flow stopped).

    Rewrite the state that twg.dedup and twg.validate's windowed rules kept under partition keys (a
    store written by a release before routing keys) under the partitions' routing keys, so that each
    step runs on the worker reading its partition. Run it while no process of the flow runs; it is
    idempotent.
    """
    from thalweg_bytewax.operators._routing import routed_step_ids
    from thalweg_bytewax.runtime.state_keys import migrate_state_keys

    flow = load_flow("recovery migrate-keys", args.flow)
    steps = sorted(s for s in routed_step_ids() if s.startswith(f"{flow.flow_id}."))
    if not steps:
        print(f"flow `{flow.flow_id}` keeps no state under routing keys: nothing to migrate")
        return 0
    done = migrate_state_keys(args.directory, steps, dry_run=args.dry_run)
    verb = "would move" if args.dry_run else "moved"
    for step, rows in done.rows.items():
        print(f"{step}: {rows:,} snapshot rows {verb} to routing keys")
    return 0


def _check(args: argparse.Namespace) -> int:
    """Run the build-time gates on a flow.

    Refuse a flow that writes a Kafka source to two or more sinks without a raw lane fed straight
    from the source.
    """
    from thalweg_bytewax.runtime.gates import check_second_sink

    flow = load_flow("check", args.flow)
    check_second_sink(flow, allow_without_raw_lane=args.allow_without_raw_lane)
    print(f"flow `{flow.flow_id}`: passes the build-time gates")
    return 0


def _coverage(args: argparse.Namespace) -> int:
    """Per sink: covered offset ranges, gaps and lag.

    Per sink, topic and partition: the covered offset ranges, the gaps between them, and lag against
    the raw lane and the source's high watermark.
    """
    from thalweg_bytewax.coverage.report import coverage_report, kafka_watermarks
    from thalweg_bytewax.coverage.store import open_coverage_store

    store = open_coverage_store(args.store)
    watermarks = None
    if args.bootstrap:
        keys = [(e.topic, e.partition) for e in store.entries(args.sink)]
        watermarks = kafka_watermarks(args.bootstrap, keys)
    rows = coverage_report(store, sink=args.sink, raw_lane=args.raw_lane, watermarks=watermarks)
    if args.plot is not None:
        from thalweg_bytewax.cli._coverage_plot import write_coverage_plot

        write_coverage_plot(args.plot, store, sink=args.sink, raw_lane=args.raw_lane)
    if args.json:
        print(json.dumps({"store": store.describe(), "partitions": rows}, indent=2))
        return 0
    if not rows:
        print(f"no coverage recorded in {store.describe()}")
    for r in rows:
        spans = ", ".join(f"{a}..{b}" for a, b in r["ranges"]) or "nothing"
        more = r["range_count"] - len(r["ranges"])
        line = f"{r['sink']}  {r['topic']}:{r['partition']}  covers {spans}"
        line += f" (+{more} ranges)" if more > 0 else ""
        line += f"; {r['gap_count']} gaps" if r["gap_count"] else "; no gaps"
        if "behind_raw" in r:
            line += f"; {r['behind_raw']:,} offsets behind the raw lane"
        if "behind_source" in r:
            line += f"; {r['behind_source']:,} behind the source (high {r['high_watermark']})"
        print(line)
        for a, b in r["gaps"]:
            print(f"    gap {a}..{b} ({b - a + 1:,} offsets)")
    return 0


def _recover(args: argparse.Namespace) -> int:
    """Replay what one sink lacks from the raw lane into it.

    Replay the offsets one sink lacks (the raw lane's coverage minus the sink's) from the raw lane's
    Parquet files through the flow's own path into that sink alone. Kafka is not read. Refused when
    the raw lane no longer holds them.
    """
    from datetime import timedelta

    from thalweg_bytewax.cli._common import EXIT_FAILED
    from thalweg_bytewax.config._user_module import import_user_module
    from thalweg_bytewax.connectors.raw_lane import (
        RawLaneSource,
        lane_held_offsets,
        lane_rows_missing,
    )
    from thalweg_bytewax.coverage.recovery_outcome import recovery_outcome
    from thalweg_bytewax.coverage.recovery_plan import (
        check_lane_rows,
        check_retention,
        parse_offsets,
        plan_recovery,
    )
    from thalweg_bytewax.coverage.spans import OffsetCoverage
    from thalweg_bytewax.coverage.store import open_coverage_store

    if args.partition is not None and not args.topic:
        msg = f"recover: `--partition {args.partition}` expected `--topic` beside it"
        raise ConfigError(msg)
    module = import_user_module(args.flow, where="recover")
    if not callable(getattr(module, "recovery_flow", None)):
        msg = (
            f"recover: flow module `{args.flow}` expected `recovery_flow(source, sink)` and "
            f"`recovery_lane()`; got neither (see docs/coverage.md, Recover)"
        )
        raise ConfigError(msg)
    lane = module.recovery_lane()
    lane_path, store_at = args.lane or lane.path, args.store or lane.store
    source = RawLaneSource(lane_path, {}, batch_size=args.batch_size)
    flow = module.recovery_flow(source, args.sink)
    sink_id = output_ids(flow)[0]  # recovery_flow keeps exactly one output
    held = lane_held_offsets(lane_path)
    store = open_coverage_store(store_at)
    plan = plan_recovery(
        store,
        sink_id,
        raw_lane=args.raw_lane or lane.sink_id,
        held=held,
        start=parse_offsets(args.start, "--from") if args.start else None,
        end=parse_offsets(args.end, "--to") if args.end else None,
        only=(args.topic, args.partition) if args.topic else None,
    )
    if not plan.missing:
        print(f"sink `{sink_id}` holds everything the raw lane landed; nothing to recover")
        return 0
    # Listed again after the store was read: while ingest goes on, an epoch recorded
    # in the store is finalized before it is recorded, so this listing holds it.
    check_retention(plan, lane_held_offsets(lane_path), lane=lane_path)
    # What the lane's names claim, checked against the rows its files hold.
    written: dict[tuple[str, int], list[tuple[str, OffsetCoverage]]] = {}
    holes = check_lane_rows(
        plan,
        lane_rows_missing(lane_path, plan.missing, written_holes=written),
        lane=lane_path,
        allow_holes=args.allow_holes,
        written_holes=written,
    )
    print(f"recovering {plan.offsets:,} offsets into `{sink_id}` from `{lane_path}`:")
    print(plan.describe())
    sourced = sum(cov.size for files in written.values() for _, cov in files)
    accepted = sum(cov.size for cov in holes.values()) - sourced
    if sourced:
        print(
            f"({sourced:,} of them never had a record: missing from their files when the "
            f"sink wrote them, as the files' footers record)"
        )
    if accepted:
        print(f"({accepted:,} of them hold no record in the lane: accepted by --allow-holes)")
    source.offsets = plan.missing
    with Progress(plan.offsets, enabled=args.progress and sys.stderr.isatty()) as progress:
        source.progress = progress.update
        from bytewax.run import cli_main

        from thalweg_bytewax.runtime.placement import cluster_declared

        epoch = timedelta(seconds=args.epoch_s)
        with cluster_declared(workers_per_process=args.workers or 1):
            cli_main(  # type: ignore[no-untyped-call]  # bytewax.run is untyped
                flow, workers_per_process=args.workers, epoch_interval=epoch
            )
    # Report what the sink now holds (its coverage in the store), not what was planned.
    outcome = recovery_outcome(plan, store, holes=holes)
    print(f"sink `{sink_id}`: recovered {outcome.recovered_offsets:,} offsets")
    if outcome.still_missing:
        print(
            f"sink `{sink_id}`: still lacks {outcome.missing_offsets:,} of the planned "
            f"offsets (its coverage in {store.describe()} does not hold them):\n"
            f"{outcome.describe_missing()}\n"
            f"expected the sink to record its coverage there (`coverage_store=`) and every "
            f"replayed offset to land; run `thalweg coverage` to see what it holds",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return 0


def add_commands(sub: Any) -> None:
    """Add ``lane stats``, ``recovery check``/``migrate-keys``, ``check``, ``coverage`` and more."""
    lane = add_command_group(sub, "lane", summary="inspect a raw lane")
    stats = add_subcommand(lane, "stats", _lane_stats)
    stats.add_argument("path", help="the lane directory (a local path or URI)")

    recovery_sub = add_command_group(
        sub, "recovery", summary="inspect a Bytewax recovery directory"
    )
    check = add_subcommand(recovery_sub, "check", _recovery_check)
    check.add_argument("flow", help="the flow as `python -m bytewax.run` takes it: MODULE[:FLOW]")
    check.add_argument("directory", help="the recovery directory (`-r` of bytewax.run)")
    migrate = add_subcommand(recovery_sub, "migrate-keys", _recovery_migrate_keys)
    migrate.add_argument("flow", help="the flow as `python -m bytewax.run` takes it: MODULE[:FLOW]")
    migrate.add_argument("directory", help="the recovery directory (`-r` of bytewax.run)")
    migrate.add_argument("--dry-run", action="store_true", help="count, change nothing")

    cov = add_subcommand(sub, "coverage", _coverage)
    cov.add_argument("store", help="the coverage store: a path (SQLite) or postgresql:// URL")
    cov.add_argument("--sink", help="only this sink (its step id)")
    cov.add_argument("--raw-lane", help="the raw lane's sink id, to show lag against it")
    cov.add_argument("--bootstrap", help="Kafka brokers, to show lag against the source")
    cov.add_argument("--json", action="store_true", help="machine-readable output")
    cov.add_argument("--plot", type=Path, metavar="FILE.svg", help="also draw it as an SVG")

    rec = add_subcommand(sub, "recover", _recover)
    rec.add_argument("flow", help="the flow module, with `recovery_flow` and `recovery_lane`")
    rec.add_argument("--sink", required=True, help="the output step to recover")
    rec.add_argument("--from", dest="start", help="first offset: N or topic:partition=N,...")
    rec.add_argument("--to", dest="end", help="last offset (inclusive), as --from")
    rec.add_argument("--topic", help="only this topic")
    rec.add_argument("--partition", type=int, help="only this partition (with --topic)")
    rec.add_argument("--lane", help="the raw lane (default: the flow's)")
    rec.add_argument("--store", help="the coverage store (default: the flow's)")
    rec.add_argument("--raw-lane", help="the raw lane's sink id (default: the flow's)")
    rec.add_argument("--batch-size", type=int, default=10_000, help="rows per batch")
    rec.add_argument("--epoch-s", type=float, default=5.0, help="seconds per epoch")
    rec.add_argument("--workers", type=int, default=1, help="worker threads")
    rec.add_argument(
        "--no-progress", dest="progress", action="store_false", help="print no progress line"
    )
    rec.add_argument(
        "--allow-holes",
        action="store_true",
        help="accept lane files that span offsets without a record (transaction markers, "
        "compaction); they are left out of what must land",
    )
    gate = add_subcommand(sub, "check", _check)
    gate.add_argument("flow", help="the flow as `python -m bytewax.run` takes it: MODULE[:FLOW]")
    gate.add_argument(
        "--allow-without-raw-lane",
        action="store_true",
        help="pass anyway (unsafe: records a sink misses cannot be recovered)",
    )
