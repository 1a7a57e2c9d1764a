"""Whether a sink's rows carry source locators, and what a sink writing none guarantees.

A sink built with ``locators="absent"`` stages batches without locator columns whole
under the key :data:`UNLOCATED`; :func:`unlocated_guarantee` words the guarantee its
write mode gives such rows, as logged once at start.
"""

from __future__ import annotations

from typing import Final, Literal

from thalweg_bytewax.errors import ConfigError

__all__ = ["UNLOCATED", "LocatorMode", "check_locator_mode", "unlocated_guarantee"]

LocatorMode = Literal["required", "absent"]
"""Whether a sink's rows carry source locators (``"required"``) or none (``"absent"``)."""

UNLOCATED: Final = ""
"""The key ``EpochSinkPartition.stage`` gets for rows without a locator."""


def check_locator_mode(component: str, locators: object) -> LocatorMode:
    """Validate a sink's ``locators`` option.

    Raises:
        ConfigError: When it is not ``"required"`` or ``"absent"``.
    """
    if locators == "required":
        return "required"
    if locators == "absent":
        return "absent"
    msg = (
        f"{component}: `locators` expected 'required' (rows carry source locators: "
        f"exactly once) or 'absent' (rows without them); got {locators!r}"
    )
    raise ConfigError(msg)


def unlocated_guarantee(component: str, mode: str, key_columns: tuple[str, ...] = ()) -> str:
    """The guarantee of a sink writing rows without a locator, as logged once at start."""
    if mode == "upsert":
        keys = ", ".join(f"`{k}`" for k in key_columns)
        return (
            f"{component}: rows carry no source locator (locators='absent'); upserts by "
            f"({keys}) are effectively-once: a replay after a crash overwrites the same keys "
            f"with the same rows"
        )
    return (
        f"{component}: rows carry no source locator (locators='absent'); appends are "
        f"at-least-once: a crash after the table's commit and before the recovery snapshot "
        f"appends that epoch's rows again on resume (upsert by key for effectively-once)"
    )
