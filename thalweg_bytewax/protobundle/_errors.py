"""The error of a proto bundle that cannot be built: every problem, listed at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thalweg_bytewax.errors import ConfigError

__all__ = ["BundleError"]


class BundleError(ConfigError):
    """A proto source cannot be bundled; the message lists every problem found.

    Missing imports, import cycles and conflicting duplicates are all collected before
    this is raised, so one run names everything to fix.

    Args:
        message: The summary line, in the error-message grammar.
        problems: One line per problem (also part of the message).

    Attributes:
        problems: One line per problem.
    """

    __module__ = "thalweg_bytewax.protobundle"

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        self.problems = tuple(problems)
        text = message + "".join(f"\n  - {p}" for p in self.problems)
        super().__init__(text)
        self.summary = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.summary, self.problems))
