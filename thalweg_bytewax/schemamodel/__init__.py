"""A neutral schema model, with Avro, JSON Schema and Protobuf in and ODCS v3.2.0 out.

Every format converts through :class:`SchemaModel` (fields with a type, required flag,
description, nested objects, enum symbols and logical types), so each format is one
spoke, never a pairwise converter. The ODCS contract it writes loads back with
:func:`~thalweg_bytewax.contracts.load_contract` and resolves to the same Arrow schema
the codec decodes to; what ODCS cannot say is stated in the contract (see
:func:`to_odcs`), never silently dropped.

Example:
    >>> from thalweg_bytewax.schemamodel import from_avro, to_odcs_yaml
    >>> model = from_avro({"type": "record", "name": "Order", "fields": [
    ...     {"name": "id", "type": "long"}]})
    >>> print(to_odcs_yaml([model], contract_id="orders").splitlines()[0])
    apiVersion: v3.2.0
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from thalweg_bytewax._deps import require
from thalweg_bytewax._lazy import lazy_package
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.schemamodel._avro import from_avro
from thalweg_bytewax.schemamodel._json import from_json_schema
from thalweg_bytewax.schemamodel._model import Kind, SchemaField, SchemaModel, SchemaType
from thalweg_bytewax.schemamodel._odcs import LOSS_PROPERTY, ODCS_API_VERSION, to_odcs

if TYPE_CHECKING:
    from thalweg_bytewax.schemamodel._protobuf import from_protobuf

# Lazy: the Protobuf spoke imports google.protobuf, which a JSON or Avro flow never needs.
_LAZY = {"from_protobuf": "._protobuf"}

__all__ = [
    "LOSS_PROPERTY",
    "ODCS_API_VERSION",
    "Kind",
    "SchemaField",
    "SchemaModel",
    "SchemaType",
    "from_avro",
    "from_json_schema",
    "from_protobuf",
    "model_from_file",
    "to_odcs",
    "to_odcs_yaml",
]

__getattr__, __dir__ = lazy_package(__name__, _LAZY, globals())


def to_odcs_yaml(
    models: Sequence[SchemaModel], *, contract_id: str, version: str = "1.0.0"
) -> str:
    """:func:`to_odcs` as YAML text (needs the ``contracts`` extra's PyYAML)."""
    yaml = require("yaml", extra="contracts")
    doc = to_odcs(list(models), contract_id=contract_id, version=version)
    return str(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))


def model_from_file(path: str | Path) -> SchemaModel:
    """The model of an Avro (``.avsc``) or JSON Schema file.

    A file is Avro when it ends in ``.avsc`` or its top level is an Avro ``record``;
    otherwise it is read as JSON Schema.

    Raises:
        ConfigError: When the file cannot be read or is not JSON.
        SchemaError: When the schema has a construct the codecs cannot decode.
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        msg = f"schema to-odcs: cannot read `{p}` as JSON ({exc}); expected an .avsc or JSON Schema"
        raise ConfigError(msg) from exc
    if p.suffix == ".avsc" or (isinstance(doc, dict) and doc.get("type") == "record"):
        return from_avro(doc)
    return from_json_schema(doc)
