"""``IcebergCatalogConfig``: where an Iceberg sink's catalog lives, its secrets masked.

A SQL catalog on SQLite under a local warehouse by default, or any pyiceberg catalog by
its string properties (``uri``, ``warehouse``, ``type``, ``token``, ...). Secrets live in
:class:`~pydantic.SecretStr` fields or in ``secret_properties`` and never reach a
message, a repr or a log line; a property whose key names a secret is refused in the
plain ``properties`` map. Import it from :mod:`thalweg_bytewax.connectors.iceberg.config`
(or the package).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    model_validator,
)

from thalweg_bytewax._deps import require
from thalweg_bytewax._redact import redact_url, redact_value
from thalweg_bytewax.config import SecretRef
from thalweg_bytewax.errors import ConfigError, SinkTerminalError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["IcebergCatalogConfig"]

# pyiceberg property keys, named once (CONVENTIONS rule 10).
URI = "uri"
WAREHOUSE = "warehouse"
TYPE = "type"
TOKEN = "token"  # noqa: S105 - a property name, not a secret
CREDENTIAL = "credential"
# Opens of a SQL catalog tried before giving up: only its first-open table creation
# races (a concurrent open of the same fresh warehouse), once.
_OPEN_ATTEMPTS = 3
# Key fragments that mark a property as secret: such keys belong in `secret_properties`.
_SECRET_KEY = re.compile(r"secret|token|password|credential|session|private|access-key", re.I)


class IcebergCatalogConfig(BaseModel):
    """Where the Iceberg catalog lives: a SQL catalog on SQLite by default, REST by config.

    Example::

        IcebergCatalogConfig(warehouse="lake/warehouse")                     # local, no service
        IcebergCatalogConfig(type="rest", uri="https://catalog.example/api",
                             warehouse="prod", token=SecretStr(os.environ["TOKEN"]))

    Attributes:
        name: The catalog's name (pyiceberg's, also the SQL catalog's row key).
        type: ``"sql"`` (SqlCatalog; SQLite file under the warehouse by default) or
            ``"rest"``.
        warehouse: The warehouse: a local directory or a URI (``file://``, ``s3://``…).
            Required for ``"sql"``.
        uri: The SQL catalog's SQLAlchemy URL (default ``sqlite:///<warehouse>/catalog.db``)
            or the REST catalog's endpoint (required for ``"rest"``); a secret setting (a
            URL may carry a password): ``${env:…}`` references are resolved when the
            catalog opens, and it is shown redacted.
        token: A REST bearer token (masked in reprs).
        credential: REST OAuth client credentials ``id:secret`` (masked).
        properties: Further pyiceberg catalog properties (no secrets: keys naming one are
            refused here; put them in ``secret_properties``).
        secret_properties: Secret pyiceberg properties, e.g. ``s3.secret-access-key``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str = Field(default="thalweg", min_length=1)
    """The catalog's name (pyiceberg's, also the SQL catalog's row key)."""
    type: Literal["sql", "rest"] = "sql"
    """`sql` (SQLite under the warehouse by default) or `rest`."""
    warehouse: str | None = None
    """A local directory or a URI (`file://`, `s3://`, ...); required for `sql`."""
    uri: SecretRef | None = None
    """The SQL catalog's SQLAlchemy URL or the REST endpoint (required for `rest`); a
    secret: it may carry a password (write it as a reference)."""
    token: SecretStr | None = None
    """A REST bearer token (masked)."""
    credential: SecretStr | None = None
    """REST OAuth client credentials `id:secret` (masked)."""
    properties: dict[str, str] = Field(default_factory=dict)
    """Further pyiceberg catalog properties, no secrets (keys naming one are refused)."""
    secret_properties: dict[str, SecretStr] = Field(default_factory=dict)
    """Secret pyiceberg properties, e.g. `s3.secret-access-key` (masked)."""

    @model_validator(mode="after")
    def _check(self) -> IcebergCatalogConfig:
        if self.type == "sql" and not self.warehouse:
            msg = "`warehouse` is required for the SQL catalog (a directory or a URI)"
            raise ValueError(msg)
        if self.type == "rest" and not self.uri:
            msg = "`uri` is required for the REST catalog (its endpoint)"
            raise ValueError(msg)
        secret = sorted(k for k in self.properties if _SECRET_KEY.search(k))
        if secret:
            msg = f"properties {secret} look secret; move them to `secret_properties`"
            raise ValueError(msg)
        reserved = sorted(set(self.properties) & {URI, WAREHOUSE, TYPE, TOKEN, CREDENTIAL})
        if reserved:
            msg = f"properties {reserved} have their own fields; set those instead"
            raise ValueError(msg)
        return self

    @classmethod
    def of(cls, value: object) -> IcebergCatalogConfig:
        """Build a config from a config, a mapping of its fields, or a warehouse path.

        Raises:
            ConfigError: Naming the field at fault, never echoing a secret.
        """
        if isinstance(value, cls):
            return value
        if isinstance(value, str | os.PathLike):
            value = {"warehouse": os.fspath(value)}
        if not isinstance(value, Mapping):
            msg = (
                f"iceberg sink: `catalog` expected an IcebergCatalogConfig, a mapping of its "
                f"fields or a warehouse directory; got {type(value).__name__}"
            )
            raise ConfigError(msg)
        try:
            return cls.model_validate(dict(value))
        except ValidationError as exc:
            failure = exc
        problems = "; ".join(
            f"`{'.'.join(str(p) for p in e['loc']) or 'catalog'}`: {e['msg']}"
            for e in failure.errors(include_input=False)
        )
        msg = f"iceberg sink: catalog config is invalid: {problems}; fix these fields"
        raise ConfigError(msg)

    def describe(self) -> str:
        """The catalog as messages name it: type and redacted location, never a secret."""
        where = _shown(self.uri) if self.type == "rest" else redact_url(self.warehouse or "")
        return f"{self.type} catalog `{self.name}` at `{where}`"

    def __repr_args__(self) -> Any:
        for key, value in super().__repr_args__():
            if key == URI and isinstance(value, SecretRef):
                yield key, _shown(value)
            elif key == WAREHOUSE and isinstance(value, str):
                yield key, redact_url(value)
            elif key == "properties":
                yield key, sorted(value)  # keys only
            else:
                yield key, redact_value(value)

    def catalog_properties(self) -> dict[str, str]:
        """The plain-text property map pyiceberg's ``load_catalog`` takes (secrets included)."""
        props: dict[str, str] = dict(self.properties)
        props[TYPE] = self.type
        if self.warehouse:
            props[WAREHOUSE] = _as_uri(self.warehouse)
        if self.uri is not None:
            props[URI] = self.uri.resolve()
        elif self.type == "sql" and self.warehouse:
            props[URI] = _default_sqlite_uri(self.warehouse)
        if self.token is not None:
            props[TOKEN] = self.token.get_secret_value()
        if self.credential is not None:
            props[CREDENTIAL] = self.credential.get_secret_value()
        for key, value in self.secret_properties.items():
            props[key] = value.get_secret_value()
        return props

    def load(self) -> Catalog:
        """Open the catalog (creating a local warehouse directory if needed).

        Raises:
            SinkTerminalError: When the catalog cannot be opened; the client's own text is
                not echoed (it may hold the properties).
        """
        load_catalog = require("pyiceberg.catalog", extra="iceberg").load_catalog
        if self.type == "sql" and self.warehouse and "://" not in self.warehouse:
            os.makedirs(self.warehouse, exist_ok=True)
        failure = ""
        # pyiceberg's SQL catalog creates its tables when opened: workers opening one
        # fresh warehouse at once race on that (SQLite: "table iceberg_tables already
        # exists"), and a retry finds the tables in place.
        for attempt in range(_OPEN_ATTEMPTS if self.type == "sql" else 1):
            try:
                catalog: Catalog = load_catalog(self.name, **self.catalog_properties())
                return catalog
            except Exception as exc:
                failure = type(exc).__name__
                time.sleep(0.02 * (attempt + 1))
        msg = (
            f"iceberg sink: cannot open the {self.describe()} ({failure}); check the "
            f"catalog's location and credentials"
        )
        raise SinkTerminalError(msg)


def _shown(uri: SecretRef | None) -> str:
    """A catalog URI as messages show it: references as written, a plain URL redacted."""
    if uri is None:
        return ""
    return uri.display if uri.references else redact_url(uri.resolve())


def _as_uri(warehouse: str) -> str:
    if "://" in warehouse:
        return warehouse
    return "file://" + os.path.abspath(warehouse)


def _default_sqlite_uri(warehouse: str) -> str:
    if "://" in warehouse and not warehouse.startswith("file://"):
        msg = (
            f"iceberg sink: the SQL catalog on a remote warehouse "
            f"`{redact_url(warehouse)}` needs an explicit `uri` (a SQLAlchemy URL); expected "
            f"a local warehouse for the default SQLite catalog"
        )
        raise ConfigError(msg)
    path = warehouse.removeprefix("file://")
    return "sqlite:///" + os.path.join(os.path.abspath(path), "catalog.db")
