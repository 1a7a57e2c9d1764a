"""The ``thalweg`` command line.

Commands:

* ``thalweg dev broker`` — start a local development Kafka broker (librdkafka's mock
  cluster, a real wire-protocol broker) and print its address until Ctrl-C.
* ``thalweg dev produce --bootstrap HOST:PORT`` — write sample orders to it.
* ``thalweg lane stats PATH`` — count the records per topic-partition of a raw lane.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from thalweg_bytewax import __version__
from thalweg_bytewax.errors import ThalwegError

__all__ = ["main"]


def _dev_broker(args: argparse.Namespace) -> int:
    from thalweg_bytewax import _mock_broker

    print("starting a local development broker (librdkafka mock cluster); Ctrl-C stops it")
    print("topics auto-create with 4 partitions; it keeps about 5 MB per partition")
    return _mock_broker.main(["--brokers", str(args.brokers)])


def _dev_produce(args: argparse.Namespace) -> int:
    from thalweg_bytewax.testing import produce_sample_orders

    n = produce_sample_orders(args.bootstrap, args.topic, args.count, seed=args.seed)
    where = f"`{args.topic}` on {args.bootstrap}"
    print(f"produced {n:,} sample orders (Confluent-framed Avro) to {where}")
    return 0


def _lane_stats(args: argparse.Namespace) -> int:
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    table = ds.dataset(args.path, format="parquet").to_table(
        columns=["_twg_source_topic", "_twg_source_partition", "_twg_source_offset"]
    )
    grouped = table.group_by(["_twg_source_topic", "_twg_source_partition"]).aggregate(
        [
            ("_twg_source_offset", "count"),
            ("_twg_source_offset", "min"),
            ("_twg_source_offset", "max"),
        ]
    )
    rows = grouped.sort_by(
        [("_twg_source_topic", "ascending"), ("_twg_source_partition", "ascending")]
    )
    for r in rows.to_pylist():
        span = r["_twg_source_offset_max"] - r["_twg_source_offset_min"] + 1
        gaps = span - r["_twg_source_offset_count"]
        print(
            f"{r['_twg_source_topic']}:{r['_twg_source_partition']}  "
            f"{r['_twg_source_offset_count']:,} records, offsets "
            f"{r['_twg_source_offset_min']}..{r['_twg_source_offset_max']}"
            + (f" ({gaps:,} offsets not in the lane)" if gaps else "")
        )
    print(
        f"total: {int(pc.sum(grouped.column('_twg_source_offset_count')).as_py() or 0):,} records"
    )
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="thalweg", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"thalweg-bytewax {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser("dev", help="try thalweg locally").add_subparsers(
        dest="dev", required=True
    )
    broker = dev.add_parser("broker", help="start a local development Kafka broker")
    broker.add_argument("--brokers", type=int, default=1)
    broker.set_defaults(func=_dev_broker)
    prod = dev.add_parser("produce", help="write sample orders to a broker")
    prod.add_argument(
        "--bootstrap", required=True, help="host:port printed by `thalweg dev broker`"
    )
    prod.add_argument("--topic", default="orders")
    prod.add_argument("--count", type=int, default=10_000)
    prod.add_argument("--seed", type=int, default=7)
    prod.set_defaults(func=_dev_produce)

    lane = sub.add_parser("lane", help="inspect a raw lane").add_subparsers(
        dest="lane", required=True
    )
    stats = lane.add_parser("stats", help="records per topic-partition")
    stats.add_argument("path")
    stats.set_defaults(func=_lane_stats)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``thalweg`` console script."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    try:
        return int(args.func(args))
    except ThalwegError as exc:
        print(f"thalweg: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
