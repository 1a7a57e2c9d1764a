"""The one type map: Arrow ↔ PostgreSQL and Arrow ↔ Iceberg, widening and identifiers.

Every table sink and the provisioning plan (:mod:`thalweg_bytewax.catalog`) map types
through here; nothing else builds a column type. The full table, with the reasons for
each choice, is in docs/tables.md.

Example:
    >>> import pyarrow as pa
    >>> from thalweg_bytewax.typemap import can_widen_to, iceberg_type_name, postgres_type
    >>> postgres_type(pa.decimal128(12, 2)), iceberg_type_name(pa.uint32())
    ('numeric(12,2)', 'long')
    >>> can_widen_to(pa.int32(), pa.int64()), can_widen_to(pa.int64(), pa.float64())
    (True, False)
"""

from __future__ import annotations

import pyarrow as pa

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.typemap._canonical import (
    CONVERSIONS,
    TARGETS,
    Conversion,
    Target,
    canonical_type,
    is_nested,
    same_type,
)
from thalweg_bytewax.typemap._iceberg import (
    arrow_type_of_iceberg,
    iceberg_schema,
    iceberg_type,
    iceberg_type_name,
)
from thalweg_bytewax.typemap._identifiers import (
    MAX_IDENTIFIER_BYTES,
    IdentifierMode,
    validate_identifier,
)
from thalweg_bytewax.typemap._postgres import arrow_type_of_postgres, postgres_type
from thalweg_bytewax.typemap._widening import can_widen_to, fits

__all__ = [
    "CONVERSIONS",
    "MAX_IDENTIFIER_BYTES",
    "TARGETS",
    "Conversion",
    "IdentifierMode",
    "Target",
    "arrow_type_of_iceberg",
    "arrow_type_of_postgres",
    "can_widen_to",
    "canonical_type",
    "fits",
    "iceberg_schema",
    "iceberg_type",
    "iceberg_type_name",
    "is_nested",
    "postgres_type",
    "same_type",
    "target_type_name",
    "validate_identifier",
]


def target_type_name(t: object, target: Target, *, conversion: Conversion | None = None) -> str:
    """The target's own name for the column type of ``t`` (DDL text or Iceberg spelling).

    Raises:
        ConfigError: ``t`` is not an Arrow type.
        SchemaError: The target cannot hold ``t``.
    """
    if not isinstance(t, pa.DataType):
        msg = f"type map: expected a pyarrow DataType; got {type(t).__name__}"
        raise ConfigError(msg)
    if target == "postgres":
        return postgres_type(t, conversion=conversion)
    return iceberg_type_name(t, conversion=conversion)
