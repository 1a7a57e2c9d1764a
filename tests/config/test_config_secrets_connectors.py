"""The connectors a pipeline builds from its configuration print none of its credentials.

Every credential-bearing setting of each source and sink kind holds a planted secret
(librdkafka passwords, key passwords and OAuth secrets, a DSN, a catalog URI, URLs with
userinfo and presigned signatures); the built objects' ``repr`` / ``str``, their
partition names (the label of every per-partition metric), the log records of the build
and any error it raises must hold none of it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from thalweg_bytewax.connectors.files import FileSource
from thalweg_bytewax.connectors.kafka import KafkaSink, KafkaSource
from thalweg_bytewax.pipeline import PipelineConfig
from thalweg_bytewax.pipeline._endpoints import build_sink, pipeline_source

KAFKA_SECRETS = {
    "sasl.password": "kafkaPw1Zq",
    "ssl.key.password": "keyPw2Zq",
    "ssl.keystore.password": "storePw3Zq",
    "sasl.oauthbearer.client.secret": "oauthSec4Zq",
    "sasl.oauthbearer.config": "clientSecret=oauthCfg5Zq",
}
URL_SECRETS = ["urlUser6Zq", "urlPw7Zq", "amzSig8Zq", "amzCred9Zq"]
SECRETS = [*KAFKA_SECRETS.values(), "oauthCfg5Zq", *URL_SECRETS, "saslPw10Zq", "dsnPw11Zq"]


def _url(scheme: str, host: str, path: str) -> str:
    user, pw, sig, cred = URL_SECRETS
    return f"{scheme}://{user}:{pw}@{host}/{path}?X-Amz-Signature={sig}&X-Amz-Credential={cred}"


def _config(source: dict[str, Any]) -> PipelineConfig:
    return PipelineConfig.model_validate(
        {
            "source": source,
            "sinks": {
                "ice": {
                    "kind": "iceberg",
                    "from": "clean",
                    "table": "sales.orders",
                    "catalog": {
                        "uri": _url("postgresql", "db", "catalog"),
                        "warehouse": _url("s3", "bucket", "warehouse"),
                    },
                },
                "pg": {
                    "kind": "postgres",
                    "from": "clean",
                    "table": "orders",
                    "dsn": "postgresql://app:dsnPw11Zq@db/orders",
                },
                "topic": {
                    "kind": "kafka",
                    "from": "clean",
                    "brokers": "localhost:9092",
                    "topic": "orders_out",
                    "encoder": "json",
                    "librdkafka": KAFKA_SECRETS,
                },
            },
        }
    )


KAFKA_SOURCE = {
    "kind": "kafka",
    "brokers": "localhost:9092",
    "librdkafka": KAFKA_SECRETS,
    "password": "saslPw10Zq",
}
FILES_SOURCE = {
    "kind": "files",
    "paths": [_url("https", "127.0.0.1:9", "orders.parquet"), _url("s3", "bucket", "o.csv")],
}


def _printed(obj: object) -> str:
    text = f"{obj!r} {obj}"
    if isinstance(obj, FileSource):  # partitions named after the files (a Kafka one's: topics)
        text += " " + " ".join(obj.list_parts())
    return text


@pytest.mark.parametrize("source", [KAFKA_SOURCE, FILES_SOURCE], ids=["kafka", "files"])
def test_built_connectors_print_no_credential(
    source: dict[str, Any], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Sources and sinks built from a config with credentials everywhere show none of them."""
    caplog.set_level(logging.DEBUG)
    config = _config(source).model_copy(update={"data_dir": tmp_path})
    built: list[object] = [pipeline_source(config)]
    built += [build_sink(step, sink, config, tmp_path) for step, sink in config.sinks.items()]
    assert len(built) == 1 + len(config.sinks)
    assert "ssl.keystore.password" in str(getattr(config.sinks["topic"], "librdkafka", None))
    printed = " ".join(_printed(obj) for obj in built)
    printed += " " + " ".join(r.getMessage() for r in caplog.records)
    assert [s for s in SECRETS if s in printed] == []


def test_the_secrets_reach_the_clients(tmp_path: Path) -> None:
    """Typed as secrets, the librdkafka credentials still reach the client resolved."""
    config = _config(KAFKA_SOURCE)
    sink = build_sink("topic", config.sinks["topic"], config, tmp_path)
    assert isinstance(sink, KafkaSink)
    producer = sink.producer_config("topic", 0)
    assert {k: producer[k] for k in KAFKA_SECRETS} == KAFKA_SECRETS
    source = pipeline_source(config)
    assert isinstance(source, KafkaSource)
    consumer = source._config.consumer_config()
    assert consumer["sasl.password"] == "saslPw10Zq"  # the `password` setting wins
    assert consumer["ssl.key.password"] == KAFKA_SECRETS["ssl.key.password"]
