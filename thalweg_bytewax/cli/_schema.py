"""``thalweg describe-schema``: the exact Arrow schema a source decodes to."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Literal

from thalweg_bytewax.cli._subcommand import add_subcommand
from thalweg_bytewax.errors import ConfigError

__all__ = ["add_commands"]


def _protobuf_from_registry(source: Any, schema_id: int, message: str | None) -> Any:
    from google.protobuf import descriptor_pb2

    from thalweg_bytewax.codecs import ProtobufCodec
    from thalweg_bytewax.codecs._proto_pool import RegistryDescriptors

    root = RegistryDescriptors(source).file_for(schema_id)
    fds = descriptor_pb2.FileDescriptorSet()
    seen: set[str] = set()

    def add(fd: Any) -> None:  # dependencies first, as protoc --include_imports does
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dep in fd.dependencies:
            add(dep)
        fd.CopyToProto(fds.file.add())

    add(root)
    return ProtobufCodec(descriptor_set=fds, message_type=message, framing="none")


def _registry_schema(args: argparse.Namespace) -> tuple[str, Any]:
    from thalweg_bytewax.codecs import AvroCodec, JsonCodec
    from thalweg_bytewax.registry import schema_source

    source = schema_source(args.registry)
    if args.id is not None:
        resolved = source.get(args.id)
        what = f"schema id {args.id}"
    else:
        version: int | Literal["latest"] = (
            "latest" if args.version in (None, "latest") else int(args.version)
        )
        resolved = source.get_version(args.subject, version)
        what = f"subject `{args.subject}` version {resolved.version or version}"
    kind = resolved.schema_type.upper()
    label = f"{kind.lower()} {what} from `{source.description}`"
    if kind == "AVRO":
        if resolved.schema_id is not None:
            return label, AvroCodec(source).arrow_schema_for(resolved.schema_id)
        doc = json.loads(resolved.schema_str)
        return label, AvroCodec(framing="none", schema=doc).arrow_schema
    if kind == "JSON":
        return label, JsonCodec(json.loads(resolved.schema_str)).arrow_schema
    if kind == "PROTOBUF":
        if resolved.schema_id is None:
            msg = f"describe-schema: {what} has no schema id; pass `--id`"
            raise ConfigError(msg)
        codec = _protobuf_from_registry(source, resolved.schema_id, args.message)
        return f"{label}, message `{codec.message_type}`", codec.arrow_schema
    msg = f"describe-schema: expected an AVRO, PROTOBUF or JSON schema; got {kind!r}"
    raise ConfigError(msg)


def _file_schema(args: argparse.Namespace) -> tuple[str, Any]:
    from thalweg_bytewax.codecs import AvroCodec, JsonCodec, ProtobufCodec
    from thalweg_bytewax.registry import DirectorySchemaSource

    if args.avsc:
        path = Path(args.avsc)
        if not path.is_file():
            msg = f"describe-schema: `{path}` is not a file"
            raise ConfigError(msg)
        # Through a directory source, so named types in sibling .avsc files resolve
        # exactly as they do when decoding.
        source = DirectorySchemaSource(path.parent, ids={path.name: path.name})
        return f"avro `{path}`", AvroCodec(source).arrow_schema_for(path.name)
    if args.pb:
        codec = ProtobufCodec(descriptor_set=args.pb, message_type=args.message, framing="none")
        return f"protobuf `{args.pb}`, message `{codec.message_type}`", codec.arrow_schema
    return f"json schema `{args.json_schema}`", JsonCodec(args.json_schema).arrow_schema


def _duckdb_types(schema: Any) -> list[str] | None:
    try:
        import duckdb
    except ImportError:
        return None
    con = duckdb.connect()
    try:
        rel = con.from_arrow(schema.empty_table())
        return [str(t) for t in rel.types]
    except duckdb.Error:
        return None
    finally:
        con.close()


def _describe_schema(args: argparse.Namespace) -> int:
    """Print the exact Arrow schema a source decodes to.

    Print the exact Arrow schema a source decodes to, plus the metadata columns the policy appends
    and DuckDB type hints. Give one source: --registry with --subject [--version] or --id; --avsc;
    --pb with --message; --json-schema.
    """
    import pyarrow as pa

    from thalweg_bytewax.records.metadata import MetadataColumns, MetadataPolicy

    sources = [bool(args.registry), bool(args.avsc), bool(args.pb), bool(args.json_schema)]
    if sum(sources) != 1:
        msg = (
            "describe-schema: expected exactly one of `--registry`, `--avsc`, `--pb` and "
            "`--json-schema`"
        )
        raise ConfigError(msg)
    if args.registry and (args.id is None) == (args.subject is None):
        msg = "describe-schema: with `--registry`, expected exactly one of `--id` and `--subject`"
        raise ConfigError(msg)
    if args.version is not None and args.subject is None:
        msg = "describe-schema: `--version` needs `--subject`"
        raise ConfigError(msg)
    label, payload = _registry_schema(args) if args.registry else _file_schema(args)
    columns = MetadataColumns(args.metadata_prefix)
    policy = MetadataPolicy(args.metadata)
    raw = columns.raw_schema
    schema = pa.schema([*payload, *(raw.field(n) for n in columns.policy_columns(policy))])
    print(f"# {label}")
    print(
        f"# decodes to {len(payload)} payload columns + {len(schema) - len(payload)} "
        f"metadata columns (metadata={policy.value})"
    )
    print(
        schema.to_string(
            show_schema_metadata=False, show_field_metadata=False, element_size_limit=1 << 20
        )
    )
    hints = _duckdb_types(schema) if args.hints else None
    if hints is not None:
        width = max(len(n) for n in schema.names)
        print("\n# target type hints (DuckDB)")
        for name, hint in zip(schema.names, hints, strict=True):
            print(f"{name:<{width}}  {hint}")
    return 0


def add_commands(sub: Any) -> None:
    """Add ``describe-schema`` to the CLI's subparsers."""
    desc = add_subcommand(sub, "describe-schema", _describe_schema)
    desc.add_argument("--registry", help="registry URL (http(s)://, mock://) or schema dir")
    desc.add_argument("--subject", help="registry subject, e.g. orders-value")
    desc.add_argument("--version", help="subject version (default: latest)")
    desc.add_argument("--id", type=int, help="registry schema id")
    desc.add_argument("--avsc", help="Avro schema file")
    desc.add_argument("--pb", help="Protobuf FileDescriptorSet (protoc --include_imports)")
    desc.add_argument("--message", help="fully-qualified Protobuf message name")
    desc.add_argument("--json-schema", help="JSON Schema file")
    desc.add_argument(
        "--metadata",
        choices=["none", "locator", "all"],
        default="locator",
        help="metadata policy of the decoded lane (default: locator)",
    )
    desc.add_argument("--metadata-prefix", default="_twg_", help=argparse.SUPPRESS)
    desc.add_argument(
        "--no-hints", dest="hints", action="store_false", help="omit the DuckDB type hints"
    )
