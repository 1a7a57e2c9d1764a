"""A pipeline's ``[[windows]]`` section: an event-time window over a SQL node's rows.

``kind`` picks the keys that size a window (``size``; ``length`` and ``step``; ``gap``)
and a window takes no other kind's; the keys' old names in seconds still load, with a
``DeprecationWarning``; the aggregates are checked by the window operator's own plan at
load rather than at build.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Literal, Self

from pydantic import Field, model_validator

from thalweg_bytewax.config import ConfigModel, Duration, renamed_keys, seconds
from thalweg_bytewax.errors import ConfigError

if TYPE_CHECKING:
    from thalweg_bytewax.windows.aggregate import WindowSpec

__all__ = ["WindowKind", "WindowSection"]

WindowKind = Literal["tumbling", "sliding", "session"]
"""The kinds of event-time window a pipeline declares (`[[windows]]` ``kind``)."""

# The keys that size a window, by kind: a window takes its own kind's and no other's.
_WINDOW_KEYS: dict[str, tuple[str, ...]] = {
    "tumbling": ("size",),
    "sliding": ("length", "step"),
    "session": ("gap",),
}
# The window keys' names before they became durations (seconds, `_s`).
_OLD_WINDOW_KEYS = {
    "size_s": "size",
    "length_s": "length",
    "step_s": "step",
    "gap_s": "gap",
    "allowed_lateness_s": "allowed_lateness",
    "allowed_skew_s": "allowed_skew",
}


class WindowSection(ConfigModel):
    """An event-time window over a SQL node's rows; ``kind`` picks the keys that size it.

    * ``tumbling`` (the default): fixed, non-overlapping windows of ``size``;
    * ``sliding``: windows of ``length`` starting every ``step`` (``step`` <= ``length``;
      a record counts in every window that holds it);
    * ``session``: runs of a group's records less than ``gap`` apart; a session ends
      ``gap`` after its last record.

    Every duration is seconds or ISO-8601 (``60``, ``"PT1M"``); the keys' old names in
    seconds (``size_s``, ``allowed_lateness_s``, ...) still load, with a
    ``DeprecationWarning``. Windows are aligned to the Unix epoch (UTC), as in
    :func:`thalweg_bytewax.operators.window_agg`, which builds them. Sinks read the
    closed windows with ``from = "<name>"`` and the late records' report with
    ``from = "<name>.late"``.
    """

    name: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    """The window's step id; sinks read its results with `from = "<name>"`."""
    source: str = Field(alias="from")
    """The SQL node (its `sink` name or node name) whose rows are windowed."""
    kind: WindowKind = "tumbling"
    """`tumbling` (takes `size`), `sliding` (`length`, `step`) or `session` (`gap`)."""
    size: Duration | None = None
    """tumbling: the window length (seconds or ISO-8601; `size_s` is its old name)."""
    length: Duration | None = None
    """sliding: the window length (`length_s` is its old name)."""
    step: Duration | None = None
    """sliding: from one window's start to the next, at most `length` (`step_s` is its
    old name)."""
    gap: Duration | None = None
    """session: the silence that ends a group's session (`gap_s` is its old name)."""
    time_column: str
    """The event-time column (a timestamp)."""
    group_by: list[str] = Field(default_factory=list)
    """The group columns."""
    aggs: dict[str, list[str]]
    """Output column = [function, input column], e.g. `revenue_eur = ["sum", "amount_eur"]`;
    functions: count (column `*` counts every row), sum, min, max, avg."""
    allowed_lateness: Duration = timedelta(0)
    """How long a window waits for late records, in event time (>= 0;
    `allowed_lateness_s` is its old name)."""
    allowed_skew: Duration = timedelta(seconds=60)
    """How far ahead of its ingest time a record's event time may be before it is clamped
    (>= 0; `allowed_skew_s` is its old name)."""

    @model_validator(mode="before")
    @classmethod
    def _known_kind(cls, data: object) -> object:
        if isinstance(data, dict) and "kind" in data and data["kind"] not in _WINDOW_KEYS:
            name = data.get("name", "?")
            msg = (
                f"pipeline window `{name}`: `kind` expected one of {list(_WINDOW_KEYS)}; "
                f"got {data['kind']!r}"
            )
            raise ConfigError(msg)
        if isinstance(data, dict):
            where = f"pipeline window `{data.get('name', '?')}`"
            return renamed_keys(data, _OLD_WINDOW_KEYS, where=where)
        return data

    @model_validator(mode="after")
    def _by_kind(self) -> Self:
        where = f"pipeline window `{self.name}` ({self.kind})"
        own = _WINDOW_KEYS[self.kind]
        for kind, keys in _WINDOW_KEYS.items():
            stray = [k for k in keys if k not in own and getattr(self, k) is not None]
            if stray:
                msg = (
                    f"{where}: `{stray[0]}` is for {kind} windows; a {self.kind} window "
                    f"expected {', '.join(f'`{k}`' for k in own)}"
                )
                raise ConfigError(msg)
        for key in own:
            value = getattr(self, key)
            if value is None:
                msg = (
                    f"{where}: expected `{key}` (a duration > 0: seconds or ISO-8601); got "
                    "none; add it to the table"
                )
                raise ConfigError(msg)
            if value <= timedelta(0):
                msg = f"{where}: expected `{key}` > 0 seconds; got {seconds(value):g} seconds"
                raise ConfigError(msg)
        for key in ("allowed_lateness", "allowed_skew"):
            value = getattr(self, key)
            if value < timedelta(0):
                msg = f"{where}: expected `{key}` >= 0 seconds; got {seconds(value):g} seconds"
                raise ConfigError(msg)
        step, length = self.step or timedelta(0), self.length or timedelta(0)
        if self.kind == "sliding" and step > length:
            msg = (
                f"{where}: expected `step` <= `length` ({seconds(length):g} seconds); got "
                f'{seconds(step):g} seconds; for gaps between windows use kind = "tumbling"'
            )
            raise ConfigError(msg)
        for out, spec in self.aggs.items():
            if len(spec) != 2:  # noqa: PLR2004 - [function, column]
                msg = (
                    f"pipeline window `{self.name}`: aggregate `{out}` expected "
                    f"[function, column]; got {spec!r}"
                )
                raise ConfigError(msg)
        # The operator's own checks (functions, names), at load rather than at build.
        from thalweg_bytewax.windows.aggregate import WindowPlan  # noqa: PLC0415 - pyarrow

        try:
            WindowPlan(self.spec(), self.agg_specs(), self.group_by, self.lateness())
        except ConfigError as exc:
            msg = f"pipeline window `{self.name}`: {exc}"
            raise ConfigError(msg) from None
        return self

    def spec(self) -> WindowSpec:
        """The window as :mod:`thalweg_bytewax.windows.aggregate` takes it (``Tumbling`` ...)."""
        from thalweg_bytewax.windows.aggregate import Session, Sliding, Tumbling  # noqa: PLC0415

        none = timedelta(0)
        if self.kind == "sliding":
            return Sliding(self.length or none, self.step or none)
        if self.kind == "session":
            return Session(self.gap or none)
        return Tumbling(self.size or none)

    def agg_specs(self) -> dict[str, tuple[str, str]]:
        """``aggs`` as the operator takes them: output column -> (function, column)."""
        return {out: (spec[0], spec[1]) for out, spec in self.aggs.items()}

    def lateness(self) -> timedelta:
        """:attr:`allowed_lateness` (kept for callers of the release before)."""
        return self.allowed_lateness

    def skew(self) -> timedelta:
        """:attr:`allowed_skew` (kept for callers of the release before)."""
        return self.allowed_skew
