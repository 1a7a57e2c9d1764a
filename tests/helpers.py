"""Small typed helpers shared by the tests."""

from __future__ import annotations

from thalweg_bytewax.dlq import Rejected
from thalweg_bytewax.record import Locator


def locator_of(rejected: Rejected) -> Locator:
    """The locator of a DLQ row read back from a source-fed flow: it must have one."""
    assert rejected.locator is not None, rejected
    return rejected.locator
