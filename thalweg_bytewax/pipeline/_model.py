"""``PipelineConfig``: a whole flow in one TOML file (sections in ``_sections``/``_sinks``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Self

from pydantic import Field, model_validator

from thalweg_bytewax.config import ConfigModel, load_config
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.observability.settings import ObservabilitySection
from thalweg_bytewax.pipeline._sections import (
    AuditSection,
    CodecSection,
    ContractSection,
    DedupSection,
    DlqSection,
    RawLaneSection,
    SampleSourceSection,
    SourceSection,
    SqlSection,
)
from thalweg_bytewax.pipeline._sinks import SinkSection
from thalweg_bytewax.pipeline._window_section import WindowSection

__all__ = ["CLEAN", "PipelineConfig"]

CLEAN = "clean"
"""The stream name of the records that passed the contract (a sink's `from`)."""


class PipelineConfig(ConfigModel):
    """A whole flow: source, codec, contract, dedup, SQL DAG, windows, sinks and lanes.

    Load it with :meth:`load` (TOML < ``THALWEG_*`` < ``--set``); build it with
    ``thalweg_bytewax.pipeline.build.build_pipeline``. Relative paths are under
    ``data_dir``. Checks that need no I/O run at load: every sink and window reads a
    stream that exists, step ids are unique.
    """

    component: ClassVar[str] = "pipeline"
    """Who owns these settings, as error messages name it."""

    name: str = Field(default="pipeline", pattern=r"^[a-z_][a-z0-9_]*$")
    """The flow id; the input step is `<name>_in`."""
    data_dir: Path = Path("thalweg-data")
    """The local lake directory: lanes, warehouse, coverage (relative paths live here)."""
    source: SourceSection = Field(default_factory=SampleSourceSection)
    """Where the records come from: `kind` = kafka, files, raw_lane or sample (the
    embedded orders, the default); each kind takes its connector's keys."""
    codec: CodecSection = Field(default_factory=CodecSection)
    """How payloads decode (not used by a files source)."""
    contract: ContractSection = Field(default_factory=ContractSection)
    """The data contract and its mode."""
    dedup: DedupSection = Field(default_factory=DedupSection)
    """Dropping replays."""
    sql: SqlSection = Field(default_factory=SqlSection)
    """The SQL DAG (`[[sql.nodes]]`)."""
    windows: list[WindowSection] = Field(default_factory=list)
    """Event-time windows (`[[windows]]`): tumbling, sliding or session."""
    sinks: dict[str, SinkSection] = Field(default_factory=dict)
    """The sinks (`[sinks.<step id>]`)."""
    raw_lane: RawLaneSection = Field(default_factory=RawLaneSection)
    """The raw lane."""
    dlq: DlqSection = Field(default_factory=DlqSection)
    """The dead-letter lane."""
    audit: AuditSection = Field(default_factory=AuditSection)
    """The audit lane and rule registry."""
    observability: ObservabilitySection = Field(default_factory=ObservabilitySection)
    """Where traces and metrics go beyond `/metrics` (`[observability.otlp]`)."""

    @classmethod
    def load(
        cls,
        file: str | Path | None = None,
        *,
        env: dict[str, str] | None = None,
        overrides: list[str] | tuple[str, ...] = (),
    ) -> Self:
        """Read a pipeline: defaults < TOML ``file`` (else ``THALWEG_CONFIG``) < env < overrides.

        Raises:
            ConfigError: Naming the key that is missing or invalid.
        """
        return load_config(cls, file=file, env=env, overrides=overrides)

    def under(self, path: str | Path) -> Path:
        """``path`` under ``data_dir`` unless it is absolute (or a URL, kept as is)."""
        p = Path(path)
        return p if p.is_absolute() or "://" in str(path) else self.data_dir / p

    def location(self, path: str) -> str:
        """``path`` under ``data_dir`` unless it is absolute, as text; a URL kept whole.

        Unlike :meth:`under`, a URL stays a URL (a ``Path`` folds ``s3://`` into ``s3:/``).
        """
        return path if "://" in path else str(self.under(path))

    def streams(self) -> set[str]:
        """The stream names a sink or window can read (a window's late report: `<name>.late`)."""
        names = {CLEAN}
        for node in self.sql.nodes:
            names.update({node.name, *([node.sink] if node.sink else [])})
        for w in self.windows:
            names.update({w.name, f"{w.name}.late"})
        return names

    def window_streams(self) -> set[str]:
        """The streams of window results and late reports: rows without a source locator."""
        return {n for w in self.windows for n in (w.name, f"{w.name}.late")}

    @model_validator(mode="after")
    def _wiring(self) -> Self:
        nodes = set()
        for node in self.sql.nodes:
            nodes.update({node.name, *([node.sink] if node.sink else [])})
        for w in self.windows:
            if w.source not in nodes:
                msg = (
                    f"pipeline window `{w.name}`: `from` expected a SQL node; got "
                    f"{w.source!r}; name one of {sorted(nodes)}"
                )
                raise ConfigError(msg)
        streams = self.streams()
        for step, sink in self.sinks.items():
            if sink.source not in streams:
                msg = (
                    f"pipeline sink `{step}`: `from` expected one of {sorted(streams)}; "
                    f"got {sink.source!r}"
                )
                raise ConfigError(msg)
            if (
                sink.kind in ("parquet", "arrow_ipc", "kafka", "flight")
                and sink.source in self.window_streams()
            ):
                msg = (
                    f"pipeline sink `{step}` ({sink.kind}): `from` = {sink.source!r} is a "
                    f"window stream, whose rows carry no source locator, and a {sink.kind} "
                    "sink lands rows exactly once by their locator; write windows with kind = "
                    "'iceberg' or 'postgres' (mode = 'upsert', key_columns = the group "
                    "columns and 'window_start')"
                )
                raise ConfigError(msg)
        return self
