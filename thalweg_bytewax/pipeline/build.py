"""``build_pipeline``: a :class:`~thalweg_bytewax.pipeline.PipelineConfig` as a dataflow.

The steps, by step id (those of the configuration in brackets)::

    <name>_in ─┬─ raw_lane
               └─ decode (files: split) ─┬─ dlq_decode
                                         └─ dedup ─ contract ─┬─ audit_lane, rule_registry
                                                              ├─ dlq_contract
                                                              └─ transform (the SQL DAG)
                                                                  ├─ [windows] (and <name>.late)
                                                                  └─ [sinks.<id>]

Importing this module reads nothing: the configuration is read, the contract loaded and
the codec built (by :mod:`thalweg_bytewax.pipeline._endpoints`, with the source and
sinks) when :func:`build_pipeline` runs; brokers, registries, catalogs and
databases are reached only when the dataflow runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow

import thalweg_bytewax.operators as twg
from thalweg_bytewax._redact import redact_url, redact_value
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.rules import RuleRegistrySink
from thalweg_bytewax.contracts import ContractSpec, load_contract
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.observability import otlp
from thalweg_bytewax.operators.sql_dag import sql_dag
from thalweg_bytewax.pipeline._endpoints import (
    SAMPLE_SCHEMAS,
    AnySink,
    AnySource,
    build_codec,
    build_sink,
    pipeline_source,
    resolve_path,
)
from thalweg_bytewax.pipeline._model import CLEAN, PipelineConfig
from thalweg_bytewax.pipeline._sinks import (
    IcebergSinkSection,
    KafkaSinkSection,
    ParquetSinkSection,
    PostgresSinkSection,
    SinkSection,
)
from thalweg_bytewax.pipeline._summary import (
    RunReport,
    TableCount,
    iceberg_rows,
    lane_records,
    postgres_rows,
)
from thalweg_bytewax.records import DEFAULT_COLUMNS
from thalweg_bytewax.runtime.gates import check_second_sink
from thalweg_bytewax.sql.dag import SqlDag

__all__ = ["SAMPLE_SCHEMAS", "build_pipeline", "pipeline_source"]

logger = logging.getLogger(__name__)


def _counts(config: PipelineConfig, built: Mapping[str, SinkSection]) -> list[TableCount]:
    """What the summary reads back per sink: tables (Iceberg, PostgreSQL), Parquet lanes."""
    out: list[TableCount] = []
    for s in built.values():
        if isinstance(s, IcebergSinkSection):
            catalog = s.catalog
            if catalog.warehouse is not None:
                local = config.location(catalog.warehouse)
                catalog = catalog.model_copy(update={"warehouse": local})
            where = "iceberg"
            if catalog.uri is None:
                where = f"iceberg {redact_url(catalog.warehouse or '')}"
            out.append(TableCount(s.table, where, iceberg_rows(catalog, s.table)))
    for s in built.values():
        if isinstance(s, PostgresSinkSection):
            rows = postgres_rows(s.dsn.resolve(), s.db_schema, s.table)
            out.append(TableCount(f"{s.db_schema}.{s.table}", "postgres", rows))
    for s in built.values():
        if isinstance(s, ParquetSinkSection):
            lane = config.under(s.path)
            name = redact_value(str(lane))
            out.append(TableCount(name, "parquet", partial(lane_records, lane), "lane"))
    for s in built.values():
        if isinstance(s, KafkaSinkSection):
            count = partial(_topic_offsets, s)
            out.append(TableCount(s.topic, "kafka", count, "topic"))
    return out


def _topic_offsets(sink: KafkaSinkSection) -> int | None:
    """The offsets a topic spans (records, plus transaction markers); None when it is absent."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    topic = sink.topic
    consumer = Consumer(sink.reader_config())
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return None
        total = 0
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def _known_payload_schema(codec: Any) -> pa.Schema | None:
    """The decoded payload's schema if the codec knows it before any record arrives.

    An Avro codec without a reader schema (writer schemas from a registry or a schema
    directory) knows its schema only once it has decoded; then ``None``, and the
    contract's schema, if any, stands in for it at build time.
    """
    if codec is None:
        return None
    try:
        schema: pa.Schema = codec.arrow_schema
    except SchemaError:
        return None
    return schema


def _decoded_schema(payload: pa.Schema, policy: str) -> pa.Schema:
    raw = DEFAULT_COLUMNS.raw_schema
    return pa.schema([*payload, *(raw.field(n) for n in DEFAULT_COLUMNS.policy_columns(policy))])


def build_pipeline(  # noqa: PLR0912, PLR0913, PLR0915 - one flow, drawn in the module docstring
    config: PipelineConfig,
    *,
    base_dir: str | Path | None = None,
    source: AnySource | None = None,
    raw_sink: AnySink | None = None,
    dlq_sink: AnySink | None = None,
    audit_sink: AnySink | None = None,
    summary: bool | RunReport = False,
    taps: Mapping[str, Callable[[], AnySink]] | None = None,
) -> Dataflow:
    """Build the dataflow a pipeline configuration describes.

    Args:
        config: The configuration (:meth:`PipelineConfig.load`).
        base_dir: Where relative resource paths (schemas, contract) are (default: the
            working directory; ``flows.pipeline`` passes the config file's directory).
        source: Replace the input (tests inject ``TestingSource``; ``thalweg batch``
            a ``FileSource``).
        raw_sink: Replace the raw-lane sink.
        dlq_sink: Replace the two dead-letter sinks with one (step ``dlq_lane``).
        audit_sink: Replace the audit sink.
        summary: Print the end-of-run summary when the process exits after a clean
            finish; or the :class:`~thalweg_bytewax.pipeline._summary.RunReport` to count
            into (``thalweg batch`` prints its lines itself): records read, rejects by reason, audit
            verdicts, late records, and per table or Parquet sink the rows it holds
            (read back) and the rows this run added.
        taps: Extra outputs by role, each a factory called once per stream:
            ``"read"`` gets the input (``thalweg batch`` shows progress with it).

    Returns:
        The dataflow, for ``python -m bytewax.run`` or ``bytewax.testing.run_main``.

    Raises:
        ConfigError: When the configuration cannot be built (a codec without its
            schemas, a SQL node refused against the decoded schema, OTLP export
            without the ``otlp`` extra or with a header secret that does not resolve).
    """
    # OTLP export, when configured: checked now, its exporters made when observability
    # turns on (the first partition built), so building starts no thread.
    otlp.arm(config.observability.otlp, flow_id=config.name)
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    files = config.source.kind == "files"
    # A files source reads columns, not payloads: the codec, if it has a reader schema,
    # only says what the columns are.
    codec = None if files and config.codec.reader_schema is None else build_codec(config, base)
    contract: ContractSpec | None = None
    if config.contract.path is not None:
        contract = load_contract(resolve_path(base, config.contract.path))
    payload = _known_payload_schema(codec)
    if payload is None and contract is not None:
        payload = contract.arrow_schema()
    if source is None:
        source = pipeline_source(config, schema=payload)

    flow = Dataflow(config.name)
    raw = op.input(f"{config.name}_in", flow, source)
    raw_lane = config.under(config.raw_lane.path)
    # A raw lane source reads the lane back: the flow does not write it again.
    rereads = config.source.kind == "raw_lane" and (
        config.location(config.source.path) == config.location(str(raw_lane))
    )
    if (config.raw_lane.enabled and not rereads) or raw_sink is not None:
        lane = raw_sink or ParquetSink(raw_lane, coverage_store=raw_lane)
        op.output("raw_lane", raw, lane)
    if files:
        from thalweg_bytewax.connectors.files import split_rejects  # noqa: PLC0415

        split = split_rejects("split", raw)
        ok, decode_rejects = split.ok, split.rejected
    else:
        codec = codec if codec is not None else build_codec(config, base)
        decoded = twg.decode("decode", raw, codec, metadata=config.codec.metadata)
        ok, decode_rejects = decoded.ok, decoded.rejected
    stream = ok
    if config.dedup.enabled:
        stream = twg.dedup(
            "dedup", stream, by=config.dedup.by, window=config.dedup.window, contract=contract
        )
    dlq = config.under(config.dlq.path)
    contract_rejects = None
    if contract is not None:
        checked = twg.validate(
            "contract",
            stream,
            contract,
            mode=config.contract.mode,
            sql_memory_limit_bytes=config.contract.sql_memory_limit_mb * 1024 * 1024,
        )
        stream, contract_rejects = checked.clean, checked.rejected
        if config.audit.enabled:
            audit = audit_sink or ParquetSink(config.under(config.audit.path))
            op.output("audit_lane", checked.audit, audit)
            rules = RuleRegistrySink(config.under(config.audit.rules_path), checked.ruleset)
            op.output("rule_registry", checked.audit, rules)
    if dlq_sink is not None:
        both = [decode_rejects, *([contract_rejects] if contract_rejects is not None else [])]
        op.output("dlq_lane", op.merge("rejected", *both), dlq_sink)
    else:
        op.output("dlq_decode", decode_rejects, ParquetSink(dlq / "decode"))
        if contract_rejects is not None:
            op.output("dlq_contract", contract_rejects, ParquetSink(dlq / "contract"))

    streams: dict[str, Any] = {CLEAN: stream}
    nodes: dict[str, str] = {}
    if config.sql.nodes:
        if payload is None:
            msg = (
                "pipeline `[[sql.nodes]]`: the SQL DAG expected a known input schema; got "
                "none; give the codec a reader schema or the pipeline a contract"
            )
            raise ConfigError(msg)
        specs = [n.model_dump() for n in config.sql.nodes]
        out = sql_dag(
            "transform",
            stream,
            SqlDag(specs),
            schema=_decoded_schema(payload, config.codec.metadata),
            timeout=config.sql.timeout,
            memory_limit_bytes=config.sql.memory_limit_mb * 1024 * 1024,
        )
        # A node's stream is taken only when a window or sink reads it: each one taken
        # adds a step to the flow.
        for n in config.sql.nodes:
            nodes[n.name] = nodes[n.sink or n.name] = n.name

    def stream_of(name: str) -> Any:
        if name not in streams:
            streams[name] = out[nodes[name]]
        return streams[name]

    late: list[tuple[str, Any]] = []
    for w in config.windows:
        result = twg.window_agg(
            w.name,
            stream_of(w.source),
            window=w.spec(),
            aggs=w.agg_specs(),
            group_by=tuple(w.group_by),
            time_column=w.time_column,
            allowed_lateness=w.lateness(),
            allowed_skew=w.skew(),
        )
        streams[w.name] = result.windows
        streams[f"{w.name}.late"] = result.late
        late.append((w.name, result.late))
    built: dict[str, SinkSection] = {}
    for step, section in config.sinks.items():
        sink = build_sink(step, section, config, base)
        if sink is not None:
            op.output(step, stream_of(section.source), sink)
            built[step] = section

    if summary is not False:
        tables = _counts(config, built)
        if dlq_sink is None:  # the two DLQ lanes under one directory: one line
            tables.insert(0, TableCount(str(dlq), "", partial(lane_records, dlq), "dlq lane"))
        if isinstance(summary, RunReport):
            report = summary
            report.add_tables(tables)
        else:
            report = RunReport(config.name, raw_lane, tables)
        op.output("summary_read", raw, report.sink("read"))
        op.output("summary_decode", decode_rejects, report.sink("rejected", count_by="reason"))
        if contract_rejects is not None:
            by_reason = report.sink("rejected", count_by="reason")
            op.output("summary_contract", contract_rejects, by_reason)
            op.output("summary_audit", checked.audit, report.sink("audited", count_by="verdict"))
        for name, stream_late in late:
            title = f"late, not in {name} windows"
            sink = report.sink(title, total_of="late_records", optional=True)
            step = "summary_late" if len(late) == 1 else f"summary_late_{name}"
            op.output(step, stream_late, sink)
    taps = taps or {}
    if "read" in taps:
        op.output("tap_read", raw, taps["read"]())
    # A Kafka source with several sinks needs its raw lane: refuse the flow otherwise.
    check_second_sink(flow)
    return flow
