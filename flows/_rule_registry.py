"""Publish a rule set's registry next to its audit lane, once, when the flow runs."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow.parquet as pq

from thalweg_bytewax.contracts.evaluate import RuleSet

__all__ = ["RuleRegistryWriter"]


class RuleRegistryWriter:
    """Writes ``<lake>/rules/<ruleset version>.parquet`` when the first audit rows pass.

    Use as an ``op.inspect`` callback on the audit stream. Idempotent (the name is the
    rule-set version; an atomic rename publishes it), so every worker and every restart
    may try; building the flow writes nothing. The audit lane stores each verdict with
    the rule-set version, and this registry resolves that version to rule definitions.
    """

    def __init__(self, ruleset: RuleSet, lake: Path) -> None:
        self._ruleset = ruleset
        self._path = lake / "rules" / f"{ruleset.version}.parquet"
        self._done = False

    def __call__(self, step_id: str, item: object) -> None:
        """Write the registry file unless it exists (the inspect callback)."""
        if self._done:
            return
        if not self._path.exists():
            self._path.parent.mkdir(parents=True, exist_ok=True)
            # Unique per writer: the worker threads of one process share a pid, and two
            # of them may publish the same registry at once (same content, last wins).
            staging = self._path.with_name(f".{self._path.name}.{uuid.uuid4().hex}.tmp")
            pq.write_table(self._ruleset.manifest(), staging)
            staging.replace(self._path)
        self._done = True
