"""A whole flow from one TOML file: the :class:`PipelineConfig` model (no bytewax here).

``thalweg_bytewax.pipeline.build.build_pipeline(config)`` turns it into a dataflow; run
one with::

    THALWEG_CONFIG=pipeline.toml python -m bytewax.run flows.pipeline

Sections: ``[source]`` (kafka | files | sample), ``[codec]``, ``[contract]``,
``[dedup]``, ``[[sql.nodes]]`` (the node shape of :mod:`thalweg_bytewax.sql.dag`),
``[[windows]]`` (tumbling | sliding | session), ``[sinks.<step id>]`` (parquet |
arrow_ipc | iceberg | postgres | kafka | flight, each with ``from`` naming the stream it writes),
``[raw_lane]``, ``[dlq]``, ``[audit]``.
``docs/pipeline.md`` walks through them; ``thalweg init`` writes a commented starter.

Example:
    >>> cfg = PipelineConfig.load(env={}, overrides=["source.count=10"])
    >>> cfg.source.kind, cfg.source.count
    ('sample', 10)
"""

from __future__ import annotations

from thalweg_bytewax.pipeline._model import CLEAN, PipelineConfig
from thalweg_bytewax.pipeline._sections import (
    AuditSection,
    CodecSection,
    ContractSection,
    DedupSection,
    DlqSection,
    RawLaneSection,
    SourceSection,
    SqlNodeSection,
    SqlSection,
)
from thalweg_bytewax.pipeline._sinks import (
    ArrowIPCSinkSection,
    FlightSinkSection,
    IcebergSinkSection,
    KafkaSinkSection,
    ParquetSinkSection,
    PostgresSinkSection,
    SinkKind,
    SinkSection,
)
from thalweg_bytewax.pipeline._window_section import WindowKind, WindowSection

__all__: list[str] = ["CLEAN", "PipelineConfig"]
__all__ += ["AuditSection", "CodecSection", "ContractSection", "DedupSection", "DlqSection"]
__all__ += ["RawLaneSection", "SourceSection", "SqlNodeSection", "SqlSection"]
__all__ += ["ArrowIPCSinkSection", "FlightSinkSection", "IcebergSinkSection", "KafkaSinkSection"]
__all__ += ["ParquetSinkSection", "PostgresSinkSection", "SinkKind", "SinkSection"]
__all__ += ["WindowKind", "WindowSection"]
