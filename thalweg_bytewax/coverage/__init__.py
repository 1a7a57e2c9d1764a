"""Coverage: the source offsets each sink holds, where they are recorded, what is missing.

A sink's coverage of a source partition is a set of offset spans merged by union; it
may lag what the sink holds, never lead it. What lives where:

- :mod:`~thalweg_bytewax.coverage.spans`: ``OffsetCoverage`` (the interval set), the
  replay-conflict check; its names are importable from here;
- :mod:`~thalweg_bytewax.coverage.input_span`: the source offsets a batch was made
  from, carried in its schema, so offsets rejected upstream are not gaps;
- :mod:`~thalweg_bytewax.coverage.store`, :mod:`~thalweg_bytewax.coverage.postgres`:
  where sinks record what landed (SQLite, PostgreSQL);
- :mod:`~thalweg_bytewax.coverage.recording`: how an epoch sink records its coverage
  after each durable commit;
- :mod:`~thalweg_bytewax.coverage.report`: per sink and partition, what is covered and
  what is missing;
- :mod:`~thalweg_bytewax.coverage.recovery_plan`: what ``thalweg recover`` replays from
  the raw lane.

Nothing here imports Bytewax.
"""

from __future__ import annotations

from thalweg_bytewax.coverage.spans import (
    OffsetCoverage,
    Span,
    find_replay_conflict,
    replacement_verdicts,
)

__all__ = ["OffsetCoverage", "Span", "find_replay_conflict", "replacement_verdicts"]
