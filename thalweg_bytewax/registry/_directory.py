"""A local directory of schema files as a :class:`SchemaSource`.

Private to :mod:`thalweg_bytewax.registry`, which re-exports every public name.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.registry._base import (
    RegistryError,
    ResolvedSchema,
    SchemaKey,
    SchemaSource,
    SchemaText,
    UnknownSchemaError,
)

# The facade's logger name, so log configuration and filters keep working.
logger = logging.getLogger("thalweg_bytewax.registry")

_FILE_TYPES: dict[str, str] = {".avsc": "AVRO", ".json": "JSON", ".pb": "PROTOBUF"}
_AVRO_PRIMITIVES = frozenset(
    {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
)


class DirectorySchemaSource(SchemaSource):
    """Schemas from a local directory, for offline use: ``.avsc``, ``.pb`` and ``.json``.

    How a lookup finds its file, first match wins:

    * by id ``N``: ``ids[N]`` (a path relative to the directory), else ``N.avsc``,
      ``N.pb`` or ``N.json``;
    * by GUID ``G``: ``ids[G]``, else ``G.avsc`` / ``G.pb`` / ``G.json``;
    * by subject ``S`` and version ``V``: ``S/V.<ext>`` (``latest`` is the highest ``V``),
      else ``S.<ext>`` as the only version, ``1``.

    The extension gives the type: ``.avsc`` Avro, ``.pb`` a binary Protobuf
    FileDescriptorSet (``raw`` holds the bytes, ``schema_str`` their base64), ``.json`` a
    JSON Schema. An Avro schema that names a type it does not define gets it from
    ``<full name>.avsc`` in the same directory, recursively, as a reference.

    Args:
        directory: The schema directory.
        ids: Explicit id or GUID → file mapping, for files not named by id.

    Raises:
        ConfigError: When ``directory`` is not a directory.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        ids: Mapping[int, str]
        | Mapping[str, str]
        | Mapping[SchemaKey | uuid.UUID, str]
        | None = None,
    ) -> None:
        super().__init__()
        self._dir = Path(directory)
        if not self._dir.is_dir():
            msg = f"schema directory `{self._dir}`: expected an existing directory"
            raise ConfigError(msg)
        self._ids = {(str(k) if isinstance(k, uuid.UUID) else k): v for k, v in (ids or {}).items()}

    @property
    def description(self) -> str:
        """The directory path."""
        return f"dir:{self._dir}"

    def _find(self, stem: str) -> Path | None:
        for ext in _FILE_TYPES:
            p = self._dir / f"{stem}{ext}"
            if p.is_file():
                return p
        return None

    def _load(self, path: Path, **ids: Any) -> ResolvedSchema:
        schema_type = _FILE_TYPES.get(path.suffix)
        if schema_type is None:
            msg = (
                f"schema directory `{self._dir}`: expected a .avsc, .pb or .json file; "
                f"got `{path.name}`"
            )
            raise RegistryError(msg)
        data = path.read_bytes()
        if schema_type == "PROTOBUF":
            text = base64.b64encode(data).decode("ascii")
            return ResolvedSchema(SchemaText(text, schema_type), raw=data, **ids)
        text = data.decode("utf-8")
        refs = self._avro_refs(text, path) if schema_type == "AVRO" else {}
        return ResolvedSchema(SchemaText(text, schema_type), refs, **ids)

    def _avro_refs(self, text: str, path: Path) -> dict[str, ResolvedSchema]:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            msg = f"schema directory `{self._dir}`: `{path.name}` is not valid JSON ({exc})"
            raise RegistryError(msg) from exc
        defined: set[str] = set()
        used: list[str] = []
        _walk_avro_names(doc, None, defined, used)
        out: dict[str, ResolvedSchema] = {}
        for name in used:
            if name in defined or name in out:
                continue
            ref_path = self._dir / f"{name}.avsc"
            if not ref_path.is_file():
                continue  # left for the parser to report as an unknown type
            dep = self._load(ref_path)
            for sub_name, sub in dep.references.items():
                out.setdefault(sub_name, sub)
            out[name] = dep
        return out

    def _fetch_id(self, schema_id: int, fmt: str | None) -> ResolvedSchema:
        return self._fetch_key(schema_id, schema_id=schema_id)

    def _fetch_guid(self, guid: str, fmt: str | None) -> ResolvedSchema:
        return self._fetch_key(guid, guid=guid)

    def _fetch_key(self, key: SchemaKey, **ids: Any) -> ResolvedSchema:
        rel = self._ids.get(key)
        path = self._dir / rel if rel is not None else self._find(str(key))
        if path is None or not path.is_file():
            msg = f"schema directory `{self._dir}`: no schema file for {key!r}"
            raise UnknownSchemaError(msg)
        return self._load(path, **ids)

    def _fetch_version(
        self, subject: str, version: int | Literal["latest"], fmt: str | None
    ) -> ResolvedSchema:
        sub_dir = self._dir / subject
        if sub_dir.is_dir():
            versions = sorted(
                int(p.stem)
                for p in sub_dir.iterdir()
                if p.stem.isdigit() and p.suffix in _FILE_TYPES
            )
            v = versions[-1] if version == "latest" and versions else version
            if v in versions:
                path = next(p for p in sub_dir.iterdir() if p.stem == str(v))
                return self._load(path, subject=subject, version=v)
        elif version in ("latest", 1):
            found = self._find(subject)
            if found is not None:
                return self._load(found, subject=subject, version=1)
        msg = f"schema directory `{self._dir}`: no schema for subject `{subject}` version {version}"
        raise UnknownSchemaError(msg)


def _walk_avro_names(node: Any, namespace: str | None, defined: set[str], used: list[str]) -> None:
    """Collect full names an Avro schema defines and the type names it uses."""
    if isinstance(node, str):
        if node not in _AVRO_PRIMITIVES:
            used.append(node if "." in node or namespace is None else f"{namespace}.{node}")
            used.append(node)
        return
    if isinstance(node, list):
        for item in node:
            _walk_avro_names(item, namespace, defined, used)
        return
    if not isinstance(node, dict):
        return
    t = node.get("type")
    if t in ("record", "error", "enum", "fixed") and isinstance(node.get("name"), str):
        name = node["name"]
        ns = node.get("namespace", namespace)
        full = name if "." in name or not ns else f"{ns}.{name}"
        defined.update({full, name})
        namespace = full.rsplit(".", 1)[0] if "." in full else ns
        for f in node.get("fields", []):
            _walk_avro_names(f.get("type"), namespace, defined, used)
        return
    if t == "array":
        _walk_avro_names(node.get("items"), namespace, defined, used)
    elif t == "map":
        _walk_avro_names(node.get("values"), namespace, defined, used)
    else:
        _walk_avro_names(t, namespace, defined, used)
