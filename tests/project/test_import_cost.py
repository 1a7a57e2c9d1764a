"""A decode flow loads only what it uses: no registry client, SQL engine or lake client.

Start-up is a large share of a short flow's CPU and every module loaded stays in its
RSS (docs/benchmarks.md, "Decode flow end to end", "Where the decode flow's memory
goes"), so importing ``KafkaSource -> twg.decode -> ParquetSink`` must not pull in
confluent-kafka's schema-registry client (authlib, httpx), DuckDB, thalweg's SQL and
WASM machinery, pyiceberg or polars;
and a schema directory must decode without the registry client. Each check runs in a
fresh interpreter, where ``sys.modules`` shows what importing really loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

HEAVY = (
    "confluent_kafka.schema_registry",
    "authlib",
    "duckdb",
    "thalweg_bytewax.sql",
    "thalweg_bytewax.udf.function",
    "thalweg_bytewax.operators.sql",
    "pyiceberg",
    "polars",
    "psycopg",
    "adbc_driver_postgresql",
    "fsspec",
    "jsonschema",
    "google.protobuf",
    "yaml",
)

FLOW_IMPORTS = """
import bytewax.operators as op
from bytewax.dataflow import Dataflow

import thalweg_bytewax.operators as twg
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
twg.decode, twg.DecodeOut
"""


def _loaded_after(code: str) -> list[str]:
    """The HEAVY modules a fresh interpreter holds after running ``code``."""
    probe = textwrap.dedent(code) + textwrap.dedent(
        f"""
        import json, sys
        print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.slow
@pytest.mark.parametrize(
    "codec_import",
    [
        "from thalweg_bytewax.codecs import AvroCodec\n"
        "from thalweg_bytewax.registry import DirectorySchemaSource",
        "from thalweg_bytewax.codecs import JsonCodec",
    ],
    ids=["avro", "json"],
)
def test_decode_flow_imports_no_heavy_module(codec_import: str) -> None:
    assert _loaded_after(FLOW_IMPORTS + codec_import) == []


@pytest.mark.slow
def test_schema_directory_decodes_without_the_registry_client(tmp_path) -> None:
    schema = {
        "type": "record",
        "name": "T",
        "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": "string"}],
    }
    (tmp_path / "7.avsc").write_text(json.dumps(schema))
    code = f"""
    import io, struct
    import fastavro
    from thalweg_bytewax.codecs import AvroCodec

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema({schema!r}), {{"a": 3, "b": "x"}})
    payload = b"\\x00" + struct.pack(">I", 7) + buf.getvalue()
    result = AvroCodec({str(tmp_path)!r}, engine="fastavro").decode_batch([payload])
    assert result.batch.to_pylist() == [{{"a": 3, "b": "x"}}], result
    assert not result.errors, result.errors
    """
    assert _loaded_after(code) == []


@pytest.mark.slow
def test_registry_names_still_load_on_first_use() -> None:
    code = """
    import thalweg_bytewax.registry as reg
    from thalweg_bytewax.codecs import AvroEncoder, ProtobufCodec
    from thalweg_bytewax.registry import RegistrySchemaSource, registry_client
    assert reg.schema_source("mock://imports").__class__ is RegistrySchemaSource
    assert callable(registry_client) and AvroEncoder and ProtobufCodec
    """
    assert "confluent_kafka.schema_registry" in _loaded_after(code)


@pytest.mark.slow
@pytest.mark.parametrize(
    "first",
    ["", "import thalweg_bytewax.operators.sql_dag", "import thalweg_bytewax.operators.sql"],
    ids=["alone", "after-sql-dag", "after-the-submodule"],
)
def test_twg_sql_is_the_operator_however_its_module_loads(first: str) -> None:
    code = f"""
    {first}
    import thalweg_bytewax.operators as twg
    from thalweg_bytewax.operators import sql
    from thalweg_bytewax.operators.sql import sql_node
    assert callable(twg.sql) and twg.sql is sql and twg.sql.__name__ == "sql", twg.sql
    assert "sql" in dir(twg) and "sql" in twg.__all__ and callable(sql_node)
    """
    assert "thalweg_bytewax.sql" in _loaded_after(code)
