"""A credential planted in any configuration field never leaves through any output.

The fields are enumerated from the models themselves (every section, list item and table
of sections, recursively), so a field added later is planted without anyone listing
it. Each text-typed field gets, one at a time, a credential of the shape it could
carry: a URL with userinfo and presigned-URL query values for plain text and paths (for
a secret setting, with a ``${env:…}`` reference beside them), credential-named entries (``sasl.password``,
``ssl.key.password``, ``sasl.oauthbearer.client.secret``, ...) for a free-form map.
Then every way the configuration is printed is searched for each piece of it: ``thalweg
config show`` (TOML and JSON), ``config validate``, ``config secrets`` (every format),
``repr`` / ``str`` / JSON dumps of the models, the error when the value is refused, and
every log record emitted meanwhile.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import types
import typing
from collections.abc import Iterator
from copy import deepcopy
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from pathlib import Path, PurePath
from typing import Any

import pytest
from pydantic import AwareDatetime, BaseModel, SecretStr

from flows.orders import OrdersSettings
from thalweg_bytewax.cli import main
from thalweg_bytewax.config import SecretRef, load_config
from thalweg_bytewax.connectors.files import FileSourceConfig
from thalweg_bytewax.connectors.kafka import KafkaSinkConfig, KafkaSourceConfig
from thalweg_bytewax.connectors.raw_lane import RawLaneSourceConfig
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.pipeline import PipelineConfig, SinkKind

# Keys of a client library's settings that hold a credential (librdkafka's, pyiceberg's,
# an HTTP header): each is planted in every free-form map.
CREDENTIAL_KEYS = (
    "sasl.password",
    "ssl.key.password",
    "ssl.keystore.password",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
    "s3.secret-access-key",
    "api_token",
    "Authorization",
)
# The pipeline every field is planted into, one at a time: every section present and
# every list or table of sections non-empty, so the walk reaches every model's fields.
PIPELINE_BASE: dict[str, Any] = {
    "name": "planted",
    "source": {"kind": "kafka", "brokers": "localhost:9092", "topics": ["orders"]},
    "codec": {"kind": "json"},
    "contract": {"path": "contract.yaml"},
    "sql": {"nodes": [{"name": "orders", "query": "SELECT * FROM input", "sink": "out"}]},
    "windows": [
        {
            "name": "per_minute",
            "from": "out",
            "time_column": "created_at",
            "size": 60.0,
            "aggs": {"n": ["count", "*"]},
        }
    ],
    "sinks": {
        "lake": {"kind": "parquet", "from": "out", "path": "lake"},
        "ipc": {"kind": "arrow_ipc", "from": "out", "path": "ipc"},
        "ice": {"kind": "iceberg", "from": "out", "table": "sales.orders"},
        "pg": {"kind": "postgres", "from": "out", "table": "orders", "dsn": "${env:PG_DSN}"},
        "topic": {
            "kind": "kafka",
            "from": "out",
            "brokers": "localhost:9092",
            "topic": "orders_out",
            "encoder": "json",
        },
        "flight": {
            "kind": "flight",
            "from": "out",
            "location": "grpc://127.0.0.1:8815",
            "target": "orders",
        },
    },
    "observability": {"otlp": {"endpoint": "http://localhost:4318"}},
}
MODELS: dict[str, tuple[type[BaseModel], dict[str, Any]]] = {
    "thalweg_bytewax.pipeline:PipelineConfig": (PipelineConfig, PIPELINE_BASE),
    "flows.orders:OrdersSettings": (OrdersSettings, {}),
    # Each source's own model, whole (the pipeline walk reaches the Kafka one only), and
    # the Kafka sink's (the walk reaches it as a pipeline section, beside its encoder keys).
    "thalweg_bytewax.connectors.kafka:KafkaSourceConfig": (
        KafkaSourceConfig,
        {"brokers": "localhost:9092"},
    ),
    "thalweg_bytewax.connectors.kafka:KafkaSinkConfig": (
        KafkaSinkConfig,
        {"brokers": "localhost:9092", "topic": "out"},
    ),
    "thalweg_bytewax.connectors.files:FileSourceConfig": (FileSourceConfig, {"paths": ["x.csv"]}),
    "thalweg_bytewax.connectors.raw_lane:RawLaneSourceConfig": (
        RawLaneSourceConfig,
        {"path": "raw"},
    ),
}
# Fewer planted fields than this means the walk lost its way (it finds about 95: each
# sink table holds its own kind's keys).
MIN_PLANTED_FIELDS = 90


@dataclass(frozen=True)
class Field:
    """One field to plant: the model, its key path, and its annotation."""

    spec: str
    path: tuple[str | int, ...]
    annotation: Any

    @property
    def dotted(self) -> str:
        return ".".join(str(p) for p in self.path)


def _members(annotation: Any) -> tuple[Any, ...]:
    """The members of a union (``X | None`` -> ``(X,)``), else ``(annotation,)``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):  # each member bare (`Annotated[str, ...]`)
        args = (a for a in typing.get_args(annotation) if a is not type(None))
        return tuple(m for a in args for m in _members(a))
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    return (annotation,)


def _model_of(annotation: Any, data: Any = None) -> type[BaseModel] | None:
    """The model ``annotation`` is; of a union of sections, the one ``data``'s ``kind`` names."""
    found = [m for m in _members(annotation) if isinstance(m, type) and issubclass(m, BaseModel)]
    for member in _flat(annotation):
        kind = member.model_fields.get("kind")
        if (
            kind is not None
            and isinstance(data, dict)
            and data.get("kind") in typing.get_args(kind.annotation)
        ):
            return member
    return found[0] if found else None


def _flat(annotation: Any) -> list[type[BaseModel]]:
    """Every model of a (possibly annotated) union."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _flat(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _flat(a)]
    return (
        [annotation] if isinstance(annotation, type) and issubclass(annotation, BaseModel) else []
    )


def _walk(
    spec: str, model: type[BaseModel], data: dict[str, Any], path: tuple[str | int, ...]
) -> Iterator[Field]:
    """Every leaf field of ``model`` (stepping into the sections and items ``data`` holds)."""
    for name, info in model.model_fields.items():
        key = info.alias or name
        annotation = info.annotation
        here = (*path, key)
        if (sub := _model_of(annotation)) is not None:
            yield from _walk(spec, sub, data.get(key) or {}, here)
            continue
        (member,) = _members(annotation)[:1] or (annotation,)
        origin, args = typing.get_origin(member), typing.get_args(member)
        item = _model_of(args[-1]) if args and origin in (list, dict) else None
        if item is not None and origin is list:
            items = data.get(key) or []
            assert items, f"{spec}: the base config needs an item of `{'.'.join(map(str, here))}`"
            yield from _walk(spec, item, items[0], (*here, 0))
        elif item is not None and origin is dict:
            table = data.get(key) or {}
            assert table, f"{spec}: the base config needs a table in `{'.'.join(map(str, here))}`"
            for sub_key, sub_data in table.items():
                chosen = _model_of(args[-1], sub_data) or item
                yield from _walk(spec, chosen, sub_data, (*here, sub_key))
        else:
            yield Field(spec, here, annotation)


def _fields() -> list[Field]:
    return [f for spec, (model, base) in MODELS.items() for f in _walk(spec, model, base, ())]


def _kinds(annotation: Any) -> set[str]:
    """What a field can hold: ``secret``, ``text``, ``text-list``, ``map`` or nothing textual."""
    kinds = set()
    for member in _members(annotation):
        origin, args = typing.get_origin(member), typing.get_args(member)
        if member is SecretRef or member is SecretStr:
            kinds.add("secret")
        elif member is str or (isinstance(member, type) and issubclass(member, PurePath)):
            kinds.add("text")
        elif origin in (list, tuple, set, frozenset) and args and _kinds(args[0]) & {"text"}:
            kinds.add("text-list")
        elif origin in (list, tuple) and args and isinstance(args[0], type):
            # A list of small models written as text (`partition_by = ["day(ts)"]`).
            kinds.add("text-list")
        elif origin is dict:
            kinds.add("map")
    return kinds


def _credential_url(tag: str) -> tuple[str, list[str]]:
    """A URL carrying credentials in its userinfo and query, and its secret pieces."""
    pieces = [f"user{tag}", f"pw{tag}", f"sig{tag}", f"cred{tag}", f"tok{tag}"]
    url = (
        f"s3://{pieces[0]}:{pieces[1]}@bucket/data.parquet?X-Amz-Signature={pieces[2]}"
        f"&X-Amz-Credential={pieces[3]}&token={pieces[4]}"
    )
    return url, pieces


def _plant(field: Field, tag: str) -> tuple[Any, list[str]] | None:
    """The value planted in ``field`` and its secret pieces; ``None`` when it holds no text."""
    kinds = _kinds(field.annotation)
    url, pieces = _credential_url(tag)
    if "secret" in kinds:  # a template (shown as written) with credentials beside a reference
        return f"{url}&ref=${{env:TWG_PLANTED_REF}}", pieces
    if "text" in kinds:
        return url, pieces
    if "text-list" in kinds:
        return [url], pieces
    if "map" in kinds:
        entries = {key: f"{key.replace('.', '')}{tag}" for key in CREDENTIAL_KEYS}
        value_args = typing.get_args(_members(field.annotation)[0])[1:]
        if value_args and typing.get_origin(_members(value_args[0])[0]) is list:
            return {k: [v, url] for k, v in entries.items()}, [*entries.values(), *pieces]
        return {**entries, "endpoint": url}, [*entries.values(), *pieces]
    return None


def _set(data: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    out = deepcopy(data)
    node: Any = out
    for part in path[:-1]:
        if isinstance(node, dict):
            node = node.setdefault(part, {})
        else:
            node = node[part]
    node[path[-1]] = value
    return out


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"


def _toml(data: dict[str, Any]) -> str:
    return "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in data.items())


FIELDS = _fields()
PLANTED = [f for f in FIELDS if _plant(f, "x") is not None]


def test_the_walk_finds_every_section_and_enough_fields() -> None:
    """The enumeration reaches every model and the credential-bearing fields it must."""
    dotted = {f"{f.spec.split(':')[1]}:{f.dotted}" for f in PLANTED}
    assert len(PLANTED) >= MIN_PLANTED_FIELDS, sorted(dotted)
    # Every sink kind has a table in the base config, so a kind added later is planted.
    kinds = {s["kind"] for s in PIPELINE_BASE["sinks"].values()}
    assert kinds == set(typing.get_args(SinkKind)), "add the new kind to PIPELINE_BASE"
    for expected in (
        "PipelineConfig:source.librdkafka",
        "PipelineConfig:source.password",
        "PipelineConfig:contract.path",
        "PipelineConfig:codec.registry",
        "PipelineConfig:sinks.topic.librdkafka",
        "PipelineConfig:sinks.topic.password",
        "PipelineConfig:sinks.topic.headers",
        "PipelineConfig:sinks.pg.dsn",
        "PipelineConfig:sinks.ice.catalog.uri",
        "PipelineConfig:sinks.ice.catalog.token",
        "PipelineConfig:sinks.ice.catalog.secret_properties",
        "PipelineConfig:sinks.lake.path",
        "PipelineConfig:sinks.ipc.path",
        "PipelineConfig:sinks.flight.token",
        "PipelineConfig:sinks.flight.location",
        "PipelineConfig:windows.0.aggs",
        "PipelineConfig:sql.nodes.0.query",
        "PipelineConfig:observability.otlp.headers",
        "PipelineConfig:observability.otlp.resource_attributes",
        "OrdersSettings:postgres_dsn",
        "OrdersSettings:contract",
        "OrdersSettings:data_dir",
        "KafkaSourceConfig:password",
        "KafkaSourceConfig:librdkafka",
        "KafkaSinkConfig:password",
        "KafkaSinkConfig:librdkafka",
        "KafkaSinkConfig:brokers",
        "FileSourceConfig:paths",
        "FileSourceConfig:storage_options",
        "FileSourceConfig:record_path",
        "RawLaneSourceConfig:path",
    ):
        assert expected in dotted, expected
    # A field left unplanted holds no text: a number, a flag, a fixed choice, a time or
    # duration, or bounds (a dataclass of integers).
    for f in FIELDS:
        if f not in PLANTED:
            assert all(
                typing.get_origin(m) is typing.Literal
                or m in (int, float, bool, datetime, timedelta, AwareDatetime)
                or (isinstance(m, type) and issubclass(m, Enum | datetime))
                or (dataclasses.is_dataclass(m) and _only_numbers(m))
                for m in map(_bare, _members(f.annotation))
            ), f"{f.spec}:{f.dotted} ({f.annotation}) holds text but is not planted"


def _bare(annotation: Any) -> Any:
    """``Annotated[int, Ge(0)]`` as ``int``."""
    if typing.get_origin(annotation) is typing.Annotated:
        return typing.get_args(annotation)[0]
    return annotation


def _only_numbers(cls: Any) -> bool:
    hints = typing.get_type_hints(cls)
    return all(hints[f.name] in (int, float) for f in dataclasses.fields(cls))


def _outputs(
    field: Field, file: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> dict[str, str]:
    """Every text the configuration reaches, by where it went."""
    model, _ = MODELS[field.spec]
    out: dict[str, str] = {}
    try:
        config = load_config(model, file=file, env={})
    except ConfigError as exc:
        out["load error"] = str(exc)
    else:
        out["repr"] = repr(config)
        out["str"] = str(config)
        out["model_dump json"] = json.dumps(config.model_dump(mode="json"))
        out["model_dump_json"] = config.model_dump_json()
        sections = [getattr(config, name) for name in model.model_fields]
        out["sections"] = " ".join(f"{s!r} {s}" for s in sections if isinstance(s, BaseModel))
    capsys.readouterr()
    for command in (
        ["config", "show"],
        ["config", "show", "--json"],
        ["config", "validate"],
        ["config", "secrets"],
        ["config", "secrets", "--format", "json"],
        ["config", "secrets", "--format", "names"],
    ):
        main(["-v", *command, str(file), "--model", field.spec])
        captured = capsys.readouterr()
        out[" ".join(command)] = captured.out + captured.err
    out["log"] = "\n".join(r.getMessage() for r in caplog.records)
    return out


@pytest.mark.parametrize("field", PLANTED, ids=lambda f: f"{f.spec.split(':')[1]}:{f.dotted}")
def test_a_credential_planted_in_a_field_reaches_no_output(
    field: Field,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No piece of the planted credential is in any command's output, repr, error or log."""
    for name in ("THALWEG_CONFIG", "PG_DSN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.DEBUG)
    tag = f"Q{abs(hash(field.dotted)) % 10**6:06d}Z"
    planted = _plant(field, tag)
    assert planted is not None
    value, pieces = planted
    _, base = MODELS[field.spec]
    file = tmp_path / "planted.toml"
    file.write_text(_toml(_set(base, field.path, value)))
    outputs = _outputs(field, file, capsys, caplog)
    leaks = {w: [p for p in pieces if p in text] for w, text in outputs.items()}
    leaks = {w: found for w, found in leaks.items() if found}
    assert not leaks, f"`{field.dotted}`: planted secrets printed by {leaks}"
