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

from thalweg_bytewax._lazy import export_reexports

from ._model import CLEAN as CLEAN
from ._model import PipelineConfig as PipelineConfig
from ._sections import AuditSection as AuditSection
from ._sections import CodecSection as CodecSection
from ._sections import ContractSection as ContractSection
from ._sections import DedupSection as DedupSection
from ._sections import DlqSection as DlqSection
from ._sections import RawLaneSection as RawLaneSection
from ._sections import SourceSection as SourceSection
from ._sections import SqlNodeSection as SqlNodeSection
from ._sections import SqlSection as SqlSection
from ._sinks import ArrowIPCSinkSection as ArrowIPCSinkSection
from ._sinks import FlightSinkSection as FlightSinkSection
from ._sinks import IcebergSinkSection as IcebergSinkSection
from ._sinks import KafkaSinkSection as KafkaSinkSection
from ._sinks import ParquetSinkSection as ParquetSinkSection
from ._sinks import PostgresSinkSection as PostgresSinkSection
from ._sinks import SinkKind as SinkKind
from ._sinks import SinkSection as SinkSection
from ._window_section import WindowKind as WindowKind
from ._window_section import WindowSection as WindowSection

export_reexports(globals())
