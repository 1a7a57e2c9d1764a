"""The rule registry output: the rule set a ``validate`` step enforced, beside its audit.

Audit rows name the rule-set version that judged each record; the registry resolves a
version to the full definition of each rule (:func:`thalweg_bytewax.contracts.rules_schema`),
one file per version::

    <directory>/<ruleset version>.parquet

Keep the directory outside the audit lane's (files of one dataset share one schema).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from typing_extensions import override

from thalweg_bytewax.contracts.ruleset import RuleSet
from thalweg_bytewax.errors import ConfigError, SinkTerminalError
from thalweg_bytewax.system.durable import fsync_path

__all__ = ["RuleRegistrySink"]


def _publish(ruleset: RuleSet, directory: Path) -> Path:
    """Write ``<directory>/<version>.parquet`` unless it exists; durable on return."""
    final = directory / f"{ruleset.version}.parquet"
    if final.exists():
        return final
    # Unique per writer: the workers of one process share a pid, and two of them may
    # publish the same registry at once (same content, the last rename wins).
    staging = directory / f".{final.name}.{uuid.uuid4().hex}.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        pq.write_table(ruleset.manifest(), staging)
        fsync_path(staging)
        staging.replace(final)
        fsync_path(directory)
    except OSError as exc:
        with contextlib.suppress(OSError):
            staging.unlink(missing_ok=True)
        msg = (
            f"rule registry sink `{directory}`: cannot write rule set "
            f"`{ruleset.version}`: {exc.strerror or type(exc).__name__}; check that the "
            "directory is writable"
        )
        raise SinkTerminalError(msg) from exc
    return final


class _RuleRegistryPartition(StatelessSinkPartition[Any]):
    def __init__(self, ruleset: RuleSet, directory: Path) -> None:
        self._ruleset = ruleset
        self._directory = directory
        self._done = False

    @override
    def write_batch(self, items: list[Any]) -> None:
        if not self._done:
            _publish(self._ruleset, self._directory)
            self._done = True


class RuleRegistrySink(DynamicSink[Any]):
    """Publish a rule set's registry file when the first items of its stream arrive.

    Workers are the unit of parallelism; each publishes the file once, the first time
    its partition of the stream carries items. Feed it the ``audit`` stream of the
    ``validate`` step whose :attr:`~thalweg_bytewax.operators.ValidateOut.ruleset` it
    holds, so the registry exists as soon as audit rows refer to it. The items
    themselves are not written. Durable before ``write_batch`` returns (fsync and an
    atomic rename, then the directory is fsynced); idempotent across workers and
    restarts: the file name is the rule-set version, and an existing file is kept.
    Building the flow writes nothing.

    ```python
    import bytewax.operators as op
    import thalweg_bytewax.operators as twg
    from thalweg_bytewax.connectors.parquet import ParquetSink
    from thalweg_bytewax.connectors.rules import RuleRegistrySink

    out = twg.validate("validate", orders, contract)
    op.output("audit_lane", out.audit, ParquetSink("lake/audit"))
    op.output("rule_registry", out.audit, RuleRegistrySink("lake/rules", out.ruleset))
    ```

    Args:
        directory: Local directory of the registry files (created when needed).
        ruleset: The rule set to publish, usually ``validate(...).ruleset``.

    Raises:
        ConfigError: When ``ruleset`` is not a :class:`~thalweg_bytewax.contracts.RuleSet`.
        SinkTerminalError: At run time, when the file cannot be written.
    """

    def __init__(self, directory: str | os.PathLike[str], ruleset: RuleSet) -> None:
        if not isinstance(ruleset, RuleSet):
            msg = (
                f"rule registry sink `{directory}`: expected a RuleSet (e.g. "
                f"`validate(...).ruleset`); got {type(ruleset).__name__}"
            )
            raise ConfigError(msg)
        self._directory = Path(directory)
        self._ruleset = ruleset

    @property
    def path(self) -> Path:
        """The registry file this sink publishes."""
        return self._directory / f"{self._ruleset.version}.parquet"

    @override
    def build(
        self, step_id: str, worker_index: int, worker_count: int
    ) -> _RuleRegistryPartition:
        return _RuleRegistryPartition(self._ruleset, self._directory)
