"""The errors of data contracts: an invalid definition, and a violation in ``strict`` mode."""

from __future__ import annotations

from thalweg_bytewax.errors import ConfigError, ThalwegError

__all__ = ["ContractError", "ContractViolationError"]


class ContractError(ConfigError):
    """A contract or rule definition is invalid; the message names the offending path."""

    __module__ = "thalweg_bytewax.contracts"


class ContractViolationError(ThalwegError):
    """A record violates the contract in ``strict`` mode; the flow stops.

    Args:
        message: Names the rule, the column, the offending value and the record locator.
        rule_id: The failed rule id (``name@version``).
        column: The column checked, if the rule has one.
        locator: ``topic:partition@offset`` of the first violating record, if known.
    """

    __module__ = "thalweg_bytewax.contracts"

    def __init__(
        self,
        message: str,
        rule_id: str | None = None,
        column: str | None = None,
        locator: str | None = None,
    ) -> None:
        super().__init__(message, rule_id, column, locator)
        self.rule_id = rule_id
        self.column = column
        self.locator = locator

    def __str__(self) -> str:
        return str(self.args[0])
