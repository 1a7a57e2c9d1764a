"""A schema argument that may be a data contract: the Arrow schema of one of its objects."""

from __future__ import annotations

from typing import Any

from thalweg_bytewax.errors import ConfigError

__all__ = ["contract_object_schema"]


def contract_object_schema(schema: Any, object_name: str | None, where: str) -> Any:
    """``schema`` as given, or the Arrow schema of its object ``object_name`` if a contract.

    A data contract is anything with an ``arrow_schema(object_name)`` method (a
    :class:`~thalweg_bytewax.contracts.ContractSpec`); it is recognised by that method,
    so reading a schema argument does not load the contracts package.

    Args:
        schema: What the caller passed as ``schema=``.
        object_name: The contract's schema object (``None``: its only one).
        where: Who takes the argument, as messages name it (``"json codec"``).

    Raises:
        ConfigError: When ``object_name`` is given with a schema that is not a contract.
    """
    contract = getattr(schema, "arrow_schema", None)
    if callable(contract):
        return contract(object_name)
    if object_name is not None:
        msg = (
            f"{where}: `object_name` picks a schema object of a data contract; got it "
            f"with a {type(schema).__name__} schema"
        )
        raise ConfigError(msg)
    return schema
