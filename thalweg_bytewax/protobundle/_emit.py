"""``--emit odcs``: an ODCS v3 contract of a bundle's messages, through the schema model."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from thalweg_bytewax.codecs._proto_pool import pool_from_files
from thalweg_bytewax.protobundle._errors import BundleError

if TYPE_CHECKING:
    from thalweg_bytewax.protobundle import Bundle

__all__ = ["odcs_for_bundle"]


def odcs_for_bundle(bundle: Bundle, messages: Sequence[str] = ()) -> Bundle:
    """The bundle with :attr:`Bundle.odcs` set: one schema object per message.

    Args:
        bundle: The bundle.
        messages: Fully-qualified message types (default: the entry points).

    Returns:
        A copy of the bundle carrying the contract.

    Raises:
        BundleError: When a message type is not in the bundle.
    """
    from thalweg_bytewax.schemamodel import from_protobuf, to_odcs_yaml  # noqa: PLC0415

    names = list(messages) or list(bundle.manifest["entry_points"])
    known = {m["name"] for m in bundle.manifest["messages"]}
    unknown = [n for n in names if n not in known]
    if unknown:
        msg = (
            f"proto bundle --emit odcs: expected message types of the bundle; got "
            f"{unknown!r}; see `{bundle.name}.messages.json`"
        )
        raise BundleError(msg)
    pool = pool_from_files(bundle.descriptor_set.file)
    models = [from_protobuf(pool.FindMessageTypeByName(n)) for n in names]
    text = to_odcs_yaml(models, contract_id=bundle.name)
    return dataclasses.replace(bundle, odcs=text)
