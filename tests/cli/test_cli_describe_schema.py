"""`thalweg describe-schema`: the exact Arrow schema a source decodes to."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from thalweg_bytewax.cli import main
from thalweg_bytewax.codecs import AvroCodec, JsonCodec, ProtobufCodec
from thalweg_bytewax.dev.samples import (
    ORDER_AVRO_SCHEMA,
    ORDER_MESSAGE_TYPE,
    order_descriptor_set,
    order_message_class,
    order_to_proto,
    sample_orders,
)
from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.registry import registry_client

COLS = MetadataColumns()
JSON_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "at": {"type": "string", "format": "date-time"}},
    "required": ["id"],
}


def describe(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["describe-schema", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def schema_text(schema: pa.Schema) -> str:
    text: str = schema.to_string(
        show_schema_metadata=False, show_field_metadata=False, element_size_limit=1 << 20
    )
    return text


def with_policy(payload: pa.Schema, policy: str) -> pa.Schema:
    raw = COLS.raw_schema
    return pa.schema([*payload, *(raw.field(n) for n in COLS.policy_columns(policy))])


@pytest.fixture
def avsc(tmp_path):
    path = tmp_path / "order.avsc"
    path.write_text(json.dumps(ORDER_AVRO_SCHEMA))
    return path


@pytest.mark.parametrize("policy", ["none", "locator", "all"])
def test_avsc_prints_the_exact_schema_with_the_policy_columns(capsys, avsc, policy):
    rc, out, _ = describe(capsys, "--avsc", str(avsc), "--metadata", policy)
    assert rc == 0
    payload = AvroCodec(framing="none", schema=ORDER_AVRO_SCHEMA).arrow_schema
    expected = with_policy(payload, policy)
    assert schema_text(expected) in out
    assert "omitted" not in out  # never truncated
    assert f"{len(payload)} payload columns + {len(expected) - len(payload)} metadata" in out
    assert "total" in out and "DECIMAL(12,2)" in out  # DuckDB hint
    assert "TIMESTAMP WITH TIME ZONE" in out


def test_registry_subject_and_id(capsys):
    url = f"mock://cli-{uuid.uuid4().hex}"
    sid = registry_client(url).register_schema(
        "orders-value", Schema(json.dumps(ORDER_AVRO_SCHEMA))
    )
    payload = AvroCodec(framing="none", schema=ORDER_AVRO_SCHEMA).arrow_schema
    expected = schema_text(with_policy(payload, "locator"))
    for args in (
        ["--subject", "orders-value"],
        ["--subject", "orders-value", "--version", "1"],
        ["--id", str(sid)],
    ):
        rc, out, err = describe(capsys, "--registry", url, *args)
        assert rc == 0, err
        assert expected in out
        assert out.startswith("# avro ")


def test_registry_protobuf_with_references(capsys):
    url = f"mock://cli-proto-{uuid.uuid4().hex}"
    client = registry_client(url)
    ser = ProtobufSerializer(order_message_class(), client, {"use.deprecated.format": False})
    ser(order_to_proto(next(sample_orders(1))), SerializationContext("orders", MessageField.VALUE))
    rc, out, err = describe(
        capsys,
        "--registry",
        url,
        "--subject",
        "orders-value",
        "--message",
        ORDER_MESSAGE_TYPE,
        "--no-hints",
    )
    assert rc == 0, err
    expected = ProtobufCodec(
        descriptor_set=order_descriptor_set(), message_type=ORDER_MESSAGE_TYPE
    ).arrow_schema
    assert schema_text(with_policy(expected, "locator")) in out
    assert "DuckDB" not in out


def test_pb_and_json_schema_files(capsys, tmp_path):
    pb = tmp_path / "orders.pb"
    pb.write_bytes(order_descriptor_set())
    rc, out, _ = describe(
        capsys, "--pb", str(pb), "--message", ORDER_MESSAGE_TYPE, "--metadata", "none"
    )
    assert rc == 0
    expected = ProtobufCodec(
        descriptor_set=order_descriptor_set(), message_type=ORDER_MESSAGE_TYPE
    ).arrow_schema
    assert schema_text(expected) in out and "_twg_" not in out.split("DuckDB")[0]

    js = tmp_path / "order.schema.json"
    js.write_text(json.dumps(JSON_SCHEMA))
    rc, out, _ = describe(capsys, "--json-schema", str(js))
    assert rc == 0
    assert schema_text(with_policy(JsonCodec(JSON_SCHEMA).arrow_schema, "locator")) in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "expected exactly one of `--registry`, `--avsc`, `--pb` and `--json-schema`"),
        (["--registry", "mock://cli-x"], "expected exactly one of `--id` and `--subject`"),
        (["--registry", "mock://cli-x", "--id", "424242"], "424242"),
        (["--avsc", "missing.avsc"], "`missing.avsc` is not a file"),
        (["--pb", "PB", "--message", "no.Such"], "no.Such"),
    ],
)
def test_errors_print_thalweg_prefix_and_exit_2(capsys, tmp_path, args, message):
    if "PB" in args:
        pb = tmp_path / "o.pb"
        pb.write_bytes(order_descriptor_set())
        args = [str(pb) if a == "PB" else a for a in args]
    rc, out, err = describe(capsys, *args)
    assert rc == 2
    assert err.startswith("thalweg: ") and message in err, err
    assert out == ""


@pytest.mark.slow
def test_console_entry_point(avsc):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "thalweg_bytewax.cli",
            "describe-schema",
            "--avsc",
            str(avsc),
            "--no-hints",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "order_id: string not null" in out.stdout
