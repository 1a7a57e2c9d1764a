"""The ends a pipeline configuration names, built: its source, codec, sinks and encoders.

Nothing is reached here: brokers, registries, catalogs and databases are contacted only
when the dataflow runs.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from bytewax.inputs import Source
from bytewax.outputs import Sink

from thalweg_bytewax.codecs import AvroCodec, JsonCodec, ProtobufCodec
from thalweg_bytewax.config import ConnectorConfig, SecretRef
from thalweg_bytewax.connectors.arrow_ipc.config import ArrowIPCSinkConfig
from thalweg_bytewax.connectors.flight.config import FlightSinkConfig
from thalweg_bytewax.connectors.iceberg.config import IcebergSinkConfig
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.parquet.config import ParquetSinkConfig
from thalweg_bytewax.connectors.postgres.config import PostgresSinkConfig
from thalweg_bytewax.dev._orders_sample import SampleOrdersSource
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.pipeline._model import PipelineConfig
from thalweg_bytewax.pipeline._sinks import (
    ArrowIPCSinkSection,
    FlightSinkSection,
    IcebergSinkSection,
    KafkaSinkSection,
    ParquetSinkSection,
    PostgresSinkSection,
    SinkSection,
)
from thalweg_bytewax.registry import DirectorySchemaSource

__all__ = [
    "SAMPLE_SCHEMAS",
    "AnySink",
    "AnySource",
    "build_codec",
    "build_sink",
    "pipeline_source",
    "resolve_path",
]

logger = logging.getLogger("thalweg_bytewax.pipeline.build")

SAMPLE_SCHEMAS = Path(__file__).parents[1] / "flows" / "schemas"
"""The bundled schema directory of the sample orders (id 1 is ``1.avsc``): package data
of the flagship flow, whose orders the sample source generates."""

AnySource = Source[tuple[str, object]]
"""A dataflow input of keyed batches."""
AnySink = Sink[tuple[str, object]]
"""A dataflow output of keyed batches."""


def resolve_path(base: Path, path: str) -> str:
    """A resource path relative to the configuration's directory (URLs kept as they are)."""
    return path if "://" in path or Path(path).is_absolute() else str(base / path)


def build_codec(config: PipelineConfig, base: Path) -> Any:
    """The codec the ``[codec]`` section names (paths relative to ``base``)."""
    c = config.codec
    registry: Any = c.registry.resolve() if c.registry is not None else None
    if registry is None and c.schema_dir is not None:
        registry = DirectorySchemaSource(resolve_path(base, c.schema_dir))
    if c.kind == "avro":
        reader = c.reader_schema and Path(resolve_path(base, c.reader_schema)).read_text("utf-8")
        if registry is None and c.framing == "confluent":
            if config.source.kind != "sample":
                msg = (
                    "pipeline `[codec]`: an avro codec with confluent framing expected "
                    "`registry` or `schema_dir`; got neither"
                )
                raise ConfigError(msg)
            registry = DirectorySchemaSource(SAMPLE_SCHEMAS)
            reader = reader or (SAMPLE_SCHEMAS / "1.avsc").read_text("utf-8")
        return AvroCodec(registry, reader_schema=reader or None, framing=c.framing)
    if c.kind == "protobuf":
        if registry is not None:
            return ProtobufCodec(registry, message_type=c.message_type, framing=c.framing)
        pb = resolve_path(base, c.descriptor_set or "")
        return ProtobufCodec(descriptor_set=pb, message_type=c.message_type, framing=c.framing)
    schema = resolve_path(base, c.json_schema) if c.json_schema else None
    return JsonCodec(schema)


def pipeline_source(config: PipelineConfig, *, schema: Any = None) -> AnySource:
    """The input a configuration names: Kafka, files, a raw lane or the embedded sample.

    The ``[source]`` section is the connector's own configuration model, passed whole
    (``KafkaSource.from_config``, ...): no setting is copied key by key.

    Args:
        config: The pipeline configuration.
        schema: For a files source: the Arrow schema (or contract) rows are read with.
    """
    s = config.source
    if s.kind == "kafka":
        from thalweg_bytewax.connectors.kafka import KafkaSource  # noqa: PLC0415

        return KafkaSource.from_config(s)
    if s.kind == "files":
        from thalweg_bytewax.connectors.files import FileSource  # noqa: PLC0415

        if "metadata" not in s.model_fields_set:  # the codec's, as before the source had one
            s = s.model_copy(update={"metadata": config.codec.metadata})
        infer = schema is None and not s.infer_schema
        files = s.model_copy(update={"infer_schema": True}) if infer else s
        return FileSource.from_config(files, schema=schema)
    if s.kind == "raw_lane":
        from thalweg_bytewax.connectors.raw_lane import RawLaneSource  # noqa: PLC0415

        return RawLaneSource.from_config(s.model_copy(update={"path": config.location(s.path)}))
    return SampleOrdersSource(
        s.count, topic=s.topics[0], partitions=s.partitions, batch_size=s.batch_size, seed=s.seed
    )


def build_sink(step: str, sink: SinkSection, config: PipelineConfig, base: Path) -> AnySink | None:
    """The sink a ``[sinks.<step>]`` section names; ``None`` for an optional one left out."""
    raw_lane = config.under(config.raw_lane.path)
    # Window results and late reports carry no locator: such a sink upserts them
    # (effectively once) or appends them (at least once), and records no coverage.
    mode = getattr(sink, "mode", "append")
    located = mode == "append" and sink.source not in config.window_streams()
    if isinstance(sink, ParquetSinkSection | ArrowIPCSinkSection):
        store = raw_lane if sink.coverage and config.raw_lane.enabled else None
        model = ParquetSinkConfig if sink.kind == "parquet" else ArrowIPCSinkConfig
        settings = _settings(sink, model)
        path = config.under(settings.pop("path"))
        if isinstance(sink, ParquetSinkSection):
            return ParquetSink(path, coverage_store=store, **settings)
        from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSink  # noqa: PLC0415

        return ArrowIPCSink(path, coverage_store=store, **settings)
    if isinstance(sink, IcebergSinkSection):
        from thalweg_bytewax.connectors.iceberg import IcebergSink  # noqa: PLC0415 - an extra

        settings = _settings(sink, IcebergSinkConfig)
        catalog = sink.catalog
        if catalog.warehouse is not None:
            local = config.location(catalog.warehouse)
            catalog = catalog.model_copy(update={"warehouse": local})
        settings["catalog"] = catalog
        cover = located and sink.coverage and config.raw_lane.enabled
        return IcebergSink(
            coverage_store=raw_lane if cover else None,
            **{**settings, "locators": "required" if located else "absent"},
        )
    if isinstance(sink, PostgresSinkSection):
        if _left_out(step, sink, sink.dsn, "DSN"):
            return None
        from thalweg_bytewax.connectors.postgres import PostgresSink  # noqa: PLC0415

        settings = _settings(sink, PostgresSinkConfig)
        if not settings["key_columns"]:
            settings["key_columns"] = None  # the contract's primary key, if any
        cover = located and sink.coverage and config.raw_lane.enabled
        return PostgresSink(
            coverage_store=raw_lane if cover else None,
            **{**settings, "locators": "required" if located else "absent"},
        )
    if isinstance(sink, FlightSinkSection):
        return _flight_sink(step, sink)
    from thalweg_bytewax.connectors.kafka import KafkaSink, KafkaSinkConfig  # noqa: PLC0415

    return KafkaSink.from_config(
        KafkaSinkConfig.build(_settings(sink, KafkaSinkConfig)),
        encoder=_encoder(sink, base),
        coverage_store=raw_lane if sink.coverage and config.raw_lane.enabled else None,
    )


def _flight_sink(step: str, sink: FlightSinkSection) -> AnySink | None:
    """The Flight sink a section names; ``None`` for an optional one whose token is unset."""
    if sink.token is not None and _left_out(step, sink, sink.token, "token"):
        return None
    from thalweg_bytewax.connectors.flight import FlightSink  # noqa: PLC0415

    return FlightSink.from_config(FlightSinkConfig.build(_settings(sink, FlightSinkConfig)))


def _left_out(
    step: str, sink: PostgresSinkSection | FlightSinkSection, secret: SecretRef, what: str
) -> bool:
    """Whether an optional sink is left out because its secret (``what``) is not set.

    Raises:
        ConfigError: When the secret is not set and the sink is not optional.
    """
    try:
        secret.resolve()
    except ConfigError:
        if not sink.optional:
            raise
        logger.info("pipeline sink %s: its %s is not set; left out", step, what)
        return True
    return False


def _encoder(sink: KafkaSinkSection, base: Path) -> Any:
    """The value encoder a Kafka sink section names."""
    from thalweg_bytewax.codecs import AvroEncoder, JsonEncoder, ProtobufEncoder  # noqa: PLC0415

    registry = sink.registry.resolve() if sink.registry is not None else None
    schema = (
        Path(resolve_path(base, sink.value_schema)).read_text("utf-8")
        if sink.value_schema
        else None
    )
    common: dict[str, Any] = {"subject": sink.subject, "auto_register": sink.auto_register}
    if sink.framing is not None:
        common["framing"] = sink.framing
    if sink.encoder == "avro":
        return AvroEncoder(registry, schema=schema, **common)
    if sink.encoder == "protobuf":
        pb = resolve_path(base, sink.descriptor_set) if sink.descriptor_set else None
        return ProtobufEncoder(registry, pb, message_type=sink.message_type, **common)
    return JsonEncoder(registry, schema=schema, **common)


def _settings(section: ConnectorConfig, model: type[ConnectorConfig]) -> dict[str, Any]:
    """The connector's own settings of ``section``, as its constructor's keywords."""
    names = {field.alias or name: name for name, field in model.model_fields.items()}
    return {key: getattr(section, name) for key, name in names.items()}
