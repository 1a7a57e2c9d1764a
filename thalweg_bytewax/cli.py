"""The ``thalweg`` command line.

Commands:

* ``thalweg dev broker`` — start a local development Kafka broker (librdkafka's mock
  cluster, a real wire-protocol broker), print its address and write it to
  ``.thalweg/broker`` until Ctrl-C.
* ``thalweg dev produce`` — write sample orders to it (or to ``--bootstrap HOST:PORT``).
* ``thalweg dev postgres`` — start a local PostgreSQL (pgserver) with its data in
  ``.thalweg/postgres``, print its DSN and write it to ``.thalweg/postgres.dsn`` until
  Ctrl-C; ``--print-dsn`` prints the DSN of the one running (waiting for it to start).
* ``thalweg lane stats PATH`` — count the records per topic-partition of a lane.
* ``thalweg recovery check MODULE[:FLOW] DIR`` — before resuming a flow, check that
  its recovery directory holds state only for partitions the flow still lists.
* ``thalweg coverage STORE`` — per sink, the covered offset ranges, gaps and lag
  against the raw lane (``--raw-lane SINK``) and the source (``--bootstrap``);
  ``--json`` for machines.
* ``thalweg recover MODULE --sink NAME`` — replay what one sink lacks from the raw lane,
  through the flow's own path, into that sink alone; Kafka is not read.
* ``thalweg check MODULE[:FLOW]`` — run the build-time gates on a flow (a Kafka source
  written to a second sink needs a raw lane).
* ``thalweg config validate|show|secrets [FILE]`` — load a configuration (TOML <
  ``THALWEG_*`` < ``--set``) and check it, print it with secrets as references, or list
  the secret references it needs; ``thalweg init [PATH]`` writes a commented starter.
* ``thalweg proto bundle SRC`` — compile a proto source (file, directory, repository
  with many ``src/main/proto`` roots) to a FileDescriptorSet, ``.proto`` files and a
  message manifest; ``--emit odcs`` adds an ODCS contract (docs/schemas.md).
* ``thalweg schema to-odcs FILE...`` — an ODCS v3 contract from Avro or JSON Schema.
* ``thalweg describe-schema ...`` — print the exact Arrow schema a source decodes to
  (from a registry subject or id, an ``.avsc``, a ``.pb`` + message, or a JSON Schema),
  with the metadata columns a policy appends and DuckDB type hints.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from thalweg_bytewax import __version__
from thalweg_bytewax.errors import ConfigError, ThalwegError

__all__ = ["DEV_ADDRESS_FILE", "main"]


DEV_ADDRESS_FILE = Path(".thalweg") / "broker"
"""Where ``thalweg dev broker`` publishes its address (relative to the working directory)."""


def _dev_broker(args: argparse.Namespace) -> int:
    from thalweg_bytewax import _mock_broker

    print("starting a local development broker (librdkafka mock cluster); Ctrl-C stops it")
    print("topics auto-create with 4 partitions; it keeps about 5 MB per partition")
    print(f"its address goes to `{args.address_file}`, e.g. for $(cat {args.address_file})")
    sys.stdout.flush()
    argv = ["--brokers", str(args.brokers), "--address-file", str(args.address_file)]
    return _mock_broker.main(argv)


def _dev_postgres(args: argparse.Namespace) -> int:
    from thalweg_bytewax import _dev_postgres

    if args.print_dsn:
        print(_dev_postgres.published_dsn(args.dsn_file, args.wait_s))
        return 0
    return _dev_postgres.serve(args.data_dir, args.dsn_file)


def _broker_address(path: Path, wait_s: float) -> str:
    """The address a running ``thalweg dev broker`` published, waiting for it to start."""
    import socket
    import time

    deadline = time.monotonic() + wait_s
    while not path.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    if not path.is_file():
        msg = (
            f"dev produce: no `--bootstrap` given and no broker address in `{path}` after "
            f"{wait_s:g} s; start a broker with `thalweg dev broker &` in this directory, "
            "or pass `--bootstrap HOST:PORT`"
        )
        raise ConfigError(msg)
    bootstrap = path.read_text().strip()
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            pass
    except (OSError, ValueError):
        msg = (
            f"dev produce: no broker answers at `{bootstrap}` (from `{path}`, left by a "
            "broker that did not stop cleanly?); start one with `thalweg dev broker &`"
        )
        raise ConfigError(msg) from None
    return bootstrap


def _dev_produce(args: argparse.Namespace) -> int:
    from thalweg_bytewax.testing import produce_sample_orders

    bootstrap = args.bootstrap or _broker_address(args.address_file, args.wait_s)
    n = produce_sample_orders(bootstrap, args.topic, args.count, seed=args.seed)
    where = f"`{args.topic}` on {bootstrap}"
    print(f"produced {n:,} sample orders (Confluent-framed Avro) to {where}")
    return 0


def _lane_stats(args: argparse.Namespace) -> int:
    from thalweg_bytewax.lanes import lane_stats

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
    import importlib

    from bytewax.dataflow import Dataflow

    from thalweg_bytewax.runtime.recovery import check_recovery_store

    module_name, _, attr = args.flow.partition(":")
    sys.path.insert(0, str(Path.cwd()))  # as `python -m bytewax.run` finds a flow module
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        msg = f"recovery check: cannot import flow module `{module_name}` ({exc})"
        raise ConfigError(msg) from exc
    flow = getattr(module, attr or "flow", None)
    if not isinstance(flow, Dataflow):
        msg = (
            f"recovery check: expected a `Dataflow` at `{module_name}:{attr or 'flow'}`; "
            f"got {type(flow).__name__}"
        )
        raise ConfigError(msg)
    check_recovery_store(flow, args.directory)
    print(f"recovery store {args.directory}: every stored partition is listed by the flow")
    return 0


def _load_flow(what: str, spec: str) -> Any:
    import importlib

    from bytewax.dataflow import Dataflow

    module_name, _, attr = spec.partition(":")
    sys.path.insert(0, str(Path.cwd()))  # as `python -m bytewax.run` finds a flow module
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        msg = f"{what}: cannot import flow module `{module_name}` ({exc})"
        raise ConfigError(msg) from exc
    flow = getattr(module, attr or "flow", None)
    if not isinstance(flow, Dataflow):
        msg = f"{what}: expected a `Dataflow` at `{module_name}:{attr or 'flow'}`; got {flow!r}"
        raise ConfigError(msg)
    return flow


def _check(args: argparse.Namespace) -> int:
    from thalweg_bytewax.runtime.gates import check_second_sink

    flow = _load_flow("check", args.flow)
    check_second_sink(flow, allow_without_raw_lane=args.allow_without_raw_lane)
    print(f"flow `{flow.flow_id}`: passes the build-time gates")
    return 0


def _coverage(args: argparse.Namespace) -> int:
    from thalweg_bytewax.coverage_report import coverage_report, kafka_watermarks
    from thalweg_bytewax.coverage_store import open_coverage_store

    store = open_coverage_store(args.store)
    watermarks = None
    if args.bootstrap:
        keys = [(e.topic, e.partition) for e in store.entries(args.sink)]
        watermarks = kafka_watermarks(args.bootstrap, keys)
    rows = coverage_report(store, sink=args.sink, raw_lane=args.raw_lane, watermarks=watermarks)
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
    import importlib
    from datetime import timedelta

    from thalweg_bytewax.connectors.raw_lane_source import RawLaneSource, lane_held_offsets
    from thalweg_bytewax.coverage_store import open_coverage_store
    from thalweg_bytewax.recovery_plan import check_retention, parse_offsets, plan_recovery

    if args.partition is not None and not args.topic:
        msg = f"recover: `--partition {args.partition}` expected `--topic` beside it"
        raise ConfigError(msg)
    sys.path.insert(0, str(Path.cwd()))  # as `python -m bytewax.run` finds a flow module
    try:
        module = importlib.import_module(args.flow)
    except ImportError as exc:
        msg = f"recover: cannot import flow module `{args.flow}` ({exc})"
        raise ConfigError(msg) from exc
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
    sink_id = _output_ids(flow)[0]  # recovery_flow keeps exactly one output
    held = lane_held_offsets(lane_path)
    plan = plan_recovery(
        open_coverage_store(store_at),
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
    print(f"recovering {plan.offsets:,} offsets into `{sink_id}` from `{lane_path}`:")
    print(plan.describe())
    source.offsets = plan.missing
    with _Progress(plan.offsets, enabled=args.progress and sys.stderr.isatty()) as progress:
        source.progress = progress.update
        from bytewax.run import cli_main

        epoch = timedelta(seconds=args.epoch_s)
        cli_main(  # type: ignore[no-untyped-call]  # bytewax.run is untyped
            flow, workers_per_process=args.workers, epoch_interval=epoch
        )
    print(f"sink `{sink_id}`: recovered {plan.offsets:,} offsets")
    return 0


def _output_ids(flow: Any) -> list[str]:
    def walk(steps: list[Any]) -> list[str]:
        out: list[str] = []
        for step in steps:
            out += [step.step_id] if type(step).__name__ == "output" else walk(step.substeps)
        return out

    return walk(flow.substeps)


class _Progress:
    """A rich progress bar on stderr over planned offsets, updated per partition."""

    def __init__(self, total: int, *, enabled: bool) -> None:
        self._done: dict[str, int] = {}
        self._bar: Any = None
        if enabled:
            from rich.console import Console
            from rich.progress import Progress

            self._bar = Progress(console=Console(stderr=True), transient=False)
            self._task = self._bar.add_task("recover", total=total)

    def __enter__(self) -> _Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, key: str, done: int) -> None:
        self._done[key] = done
        if self._bar is not None:
            self._bar.update(self._task, completed=sum(self._done.values()))


def _protobuf_from_registry(source: Any, schema_id: int, message: str | None) -> Any:
    from google.protobuf import descriptor_pb2

    from thalweg_bytewax.codecs import ProtobufCodec
    from thalweg_bytewax.codecs._proto_pool import RegistryDescriptors

    root = RegistryDescriptors(source).file_for(schema_id)
    fds = descriptor_pb2.FileDescriptorSet()
    seen: set[str] = set()

    def add(fd: Any) -> None:  # dependencies first, as protoc --include_imports does
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dep in fd.dependencies:
            add(dep)
        fd.CopyToProto(fds.file.add())

    add(root)
    return ProtobufCodec(descriptor_set=fds, message_type=message, framing="none")


def _registry_schema(args: argparse.Namespace) -> tuple[str, Any]:
    from thalweg_bytewax.codecs import AvroCodec, JsonCodec
    from thalweg_bytewax.registry import schema_source

    source = schema_source(args.registry)
    if args.id is not None:
        resolved = source.get(args.id)
        what = f"schema id {args.id}"
    else:
        version: int | Literal["latest"] = (
            "latest" if args.version in (None, "latest") else int(args.version)
        )
        resolved = source.get_version(args.subject, version)
        what = f"subject `{args.subject}` version {resolved.version or version}"
    kind = resolved.schema_type.upper()
    label = f"{kind.lower()} {what} from `{source.description}`"
    if kind == "AVRO":
        if resolved.schema_id is not None:
            return label, AvroCodec(source).arrow_schema_for(resolved.schema_id)
        doc = json.loads(resolved.schema_str)
        return label, AvroCodec(framing="none", schema=doc).arrow_schema
    if kind == "JSON":
        return label, JsonCodec(json.loads(resolved.schema_str)).arrow_schema
    if kind == "PROTOBUF":
        if resolved.schema_id is None:
            msg = f"describe-schema: {what} has no schema id; pass `--id`"
            raise ConfigError(msg)
        codec = _protobuf_from_registry(source, resolved.schema_id, args.message)
        return f"{label}, message `{codec.message_type}`", codec.arrow_schema
    msg = f"describe-schema: expected an AVRO, PROTOBUF or JSON schema; got {kind!r}"
    raise ConfigError(msg)


def _file_schema(args: argparse.Namespace) -> tuple[str, Any]:
    from thalweg_bytewax.codecs import AvroCodec, JsonCodec, ProtobufCodec
    from thalweg_bytewax.registry import DirectorySchemaSource

    if args.avsc:
        path = Path(args.avsc)
        if not path.is_file():
            msg = f"describe-schema: `{path}` is not a file"
            raise ConfigError(msg)
        # Through a directory source, so named types in sibling .avsc files resolve
        # exactly as they do when decoding.
        source = DirectorySchemaSource(path.parent, ids={path.name: path.name})
        return f"avro `{path}`", AvroCodec(source).arrow_schema_for(path.name)
    if args.pb:
        codec = ProtobufCodec(descriptor_set=args.pb, message_type=args.message, framing="none")
        return f"protobuf `{args.pb}`, message `{codec.message_type}`", codec.arrow_schema
    return f"json schema `{args.json_schema}`", JsonCodec(args.json_schema).arrow_schema


def _duckdb_types(schema: Any) -> list[str] | None:
    try:
        import duckdb
    except ImportError:
        return None
    con = duckdb.connect()
    try:
        rel = con.from_arrow(schema.empty_table())
        return [str(t) for t in rel.types]
    except duckdb.Error:
        return None
    finally:
        con.close()


def _describe_schema(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from thalweg_bytewax.metadata import MetadataColumns, MetadataPolicy

    sources = [bool(args.registry), bool(args.avsc), bool(args.pb), bool(args.json_schema)]
    if sum(sources) != 1:
        msg = (
            "describe-schema: expected exactly one of `--registry`, `--avsc`, `--pb` and "
            "`--json-schema`"
        )
        raise ConfigError(msg)
    if args.registry and (args.id is None) == (args.subject is None):
        msg = "describe-schema: with `--registry`, expected exactly one of `--id` and `--subject`"
        raise ConfigError(msg)
    if args.version is not None and args.subject is None:
        msg = "describe-schema: `--version` needs `--subject`"
        raise ConfigError(msg)
    label, payload = _registry_schema(args) if args.registry else _file_schema(args)
    columns = MetadataColumns(args.metadata_prefix)
    policy = MetadataPolicy(args.metadata)
    raw = columns.raw_schema
    schema = pa.schema([*payload, *(raw.field(n) for n in columns.policy_columns(policy))])
    print(f"# {label}")
    print(
        f"# decodes to {len(payload)} payload columns + {len(schema) - len(payload)} "
        f"metadata columns (metadata={policy.value})"
    )
    print(
        schema.to_string(
            show_schema_metadata=False, show_field_metadata=False, element_size_limit=1 << 20
        )
    )
    hints = _duckdb_types(schema) if args.hints else None
    if hints is not None:
        width = max(len(n) for n in schema.names)
        print("\n# target type hints (DuckDB)")
        for name, hint in zip(schema.names, hints, strict=True):
            print(f"{name:<{width}}  {hint}")
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
    broker.add_argument(
        "--address-file",
        type=Path,
        default=DEV_ADDRESS_FILE,
        help=f"write the broker address here while it runs (default: {DEV_ADDRESS_FILE})",
    )
    broker.set_defaults(func=_dev_broker)
    prod = dev.add_parser("produce", help="write sample orders to a broker")
    prod.add_argument(
        "--bootstrap",
        help="host:port of the broker (default: the address `thalweg dev broker` wrote)",
    )
    prod.add_argument(
        "--address-file",
        type=Path,
        default=DEV_ADDRESS_FILE,
        help=f"where `thalweg dev broker` wrote its address (default: {DEV_ADDRESS_FILE})",
    )
    prod.add_argument(
        "--wait-s",
        type=float,
        default=30.0,
        help="how long to wait for a just-started broker's address (default: 30)",
    )
    prod.add_argument("--topic", default="orders")
    prod.add_argument("--count", type=int, default=10_000)
    prod.add_argument("--seed", type=int, default=7)
    prod.set_defaults(func=_dev_produce)
    pg = dev.add_parser("postgres", help="start a local PostgreSQL (pgserver) and print its DSN")
    pg.add_argument(
        "--data-dir",
        type=Path,
        default=Path(".thalweg") / "postgres",
        help="where the server keeps its data between runs (default: .thalweg/postgres)",
    )
    pg.add_argument(
        "--dsn-file",
        type=Path,
        default=Path(".thalweg") / "postgres.dsn",
        help="write the DSN here while it runs (default: .thalweg/postgres.dsn)",
    )
    pg.add_argument(
        "--print-dsn",
        action="store_true",
        help="print the DSN of the running server (waiting for it) instead of starting one",
    )
    # A first start runs initdb: seconds on a laptop, tens of seconds on a loaded CI box.
    pg.add_argument(
        "--wait-s",
        type=float,
        default=120.0,
        help="with --print-dsn: how long to wait for a starting server (default: 120)",
    )
    pg.set_defaults(func=_dev_postgres)

    lane = sub.add_parser("lane", help="inspect a raw lane").add_subparsers(
        dest="lane", required=True
    )
    stats = lane.add_parser("stats", help="records per topic-partition")
    stats.add_argument("path")
    stats.set_defaults(func=_lane_stats)

    recovery = sub.add_parser("recovery", help="inspect a Bytewax recovery directory")
    check = recovery.add_subparsers(dest="recovery", required=True).add_parser(
        "check",
        help="check that a flow can resume from a recovery directory",
        description="Refuse a recovery directory holding state for partitions the flow no "
        "longer lists (a topic removed from a source), naming the step and the partitions.",
    )
    check.add_argument("flow", help="the flow as `python -m bytewax.run` takes it: MODULE[:FLOW]")
    check.add_argument("directory", help="the recovery directory (`-r` of bytewax.run)")
    check.set_defaults(func=_recovery_check)

    cov = sub.add_parser(
        "coverage",
        help="per sink: covered offset ranges, gaps and lag",
        description="Per sink, topic and partition: the covered offset ranges, the gaps "
        "between them, and lag against the raw lane and the source's high watermark.",
    )
    cov.add_argument("store", help="the coverage store: a path (SQLite) or postgresql:// URL")
    cov.add_argument("--sink", help="only this sink (its step id)")
    cov.add_argument("--raw-lane", help="the raw lane's sink id, to show lag against it")
    cov.add_argument("--bootstrap", help="Kafka brokers, to show lag against the source")
    cov.add_argument("--json", action="store_true", help="machine-readable output")
    cov.set_defaults(func=_coverage)

    rec = sub.add_parser(
        "recover",
        help="replay what one sink lacks from the raw lane into it",
        description="Replay the offsets one sink lacks (the raw lane's coverage minus the "
        "sink's) from the raw lane's Parquet files through the flow's own path into that "
        "sink alone. Kafka is not read. Refused when the raw lane no longer holds them.",
    )
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
    rec.add_argument("--no-progress", dest="progress", action="store_false")
    rec.set_defaults(func=_recover)

    gate = sub.add_parser(
        "check",
        help="run the build-time gates on a flow",
        description="Refuse a flow that writes a Kafka source to two or more sinks "
        "without a raw lane fed straight from the source.",
    )
    gate.add_argument("flow", help="the flow as `python -m bytewax.run` takes it: MODULE[:FLOW]")
    gate.add_argument(
        "--allow-without-raw-lane",
        action="store_true",
        help="pass anyway (unsafe: records a sink misses cannot be recovered)",
    )
    gate.set_defaults(func=_check)

    desc = sub.add_parser(
        "describe-schema",
        help="print the exact Arrow schema a source decodes to",
        description="Print the exact Arrow schema a source decodes to, plus the metadata "
        "columns the policy appends and DuckDB type hints. Give one source: --registry "
        "with --subject [--version] or --id; --avsc; --pb with --message; --json-schema.",
    )
    desc.add_argument("--registry", help="registry URL (http(s)://, mock://) or schema dir")
    desc.add_argument("--subject", help="registry subject, e.g. orders-value")
    desc.add_argument("--version", help="subject version (default: latest)")
    desc.add_argument("--id", type=int, help="registry schema id")
    desc.add_argument("--avsc", help="Avro schema file")
    desc.add_argument("--pb", help="Protobuf FileDescriptorSet (protoc --include_imports)")
    desc.add_argument("--message", help="fully-qualified Protobuf message name")
    desc.add_argument("--json-schema", help="JSON Schema file")
    desc.add_argument(
        "--metadata",
        choices=["none", "locator", "all"],
        default="locator",
        help="metadata policy of the decoded lane (default: locator)",
    )
    desc.add_argument("--metadata-prefix", default="_twg_", help=argparse.SUPPRESS)
    desc.add_argument(
        "--no-hints", dest="hints", action="store_false", help="omit the DuckDB type hints"
    )
    desc.set_defaults(func=_describe_schema)

    from thalweg_bytewax.config._cli import add_commands

    add_commands(sub)  # config validate|show|secrets, init
    from thalweg_bytewax.protobundle._cli import add_commands as add_proto

    add_proto(sub)  # proto bundle
    from thalweg_bytewax.schemamodel._cli import add_commands as add_schema

    add_schema(sub)  # schema to-odcs
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
