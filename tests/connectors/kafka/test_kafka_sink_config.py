"""A KafkaSink's settings are one frozen model, whether from keywords, TOML or a pipeline."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from thalweg_bytewax.codecs import JsonEncoder
from thalweg_bytewax.config import SecretRef, load_config
from thalweg_bytewax.connectors.kafka import KafkaSink, KafkaSinkConfig
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.pipeline import KafkaSinkSection, PipelineConfig
from thalweg_bytewax.pipeline._endpoints import build_sink

TOML = (
    'brokers = "a:1,b:2"\ntopic = "orders_out"\nkey = "order_id"\ntransactional = true\n'
    'shards = 4\ndelivery_timeout = 45\nunreachable_timeout = "PT2M"\n'
    '[headers]\norigin = "region"\n[librdkafka]\n"compression.type" = "zstd"\n'
)


def _keywords() -> KafkaSink:
    return KafkaSink(
        ["a:1", "b:2"],
        "orders_out",
        key="order_id",
        headers={"origin": "region"},
        transactional=True,
        shards=4,
        delivery_timeout=timedelta(seconds=45),
        unreachable_timeout=timedelta(minutes=2),
        librdkafka={"compression.type": "zstd"},
    )


def _pipeline(sink: dict[str, Any]) -> PipelineConfig:
    return PipelineConfig.model_validate(
        {"sinks": {"out": {"kind": "kafka", "from": "clean", "encoder": "json", **sink}}}
    )


def test_keywords_and_a_toml_file_build_the_same_frozen_model(tmp_path: Path) -> None:
    file = tmp_path / "sink.toml"
    file.write_text(TOML)
    loaded = load_config(KafkaSinkConfig, file=file, env={})
    built = _keywords().config
    assert built == loaded
    assert loaded.delivery_timeout == timedelta(seconds=45)
    assert KafkaSink.from_config(loaded).config is loaded
    with pytest.raises(ValidationError, match="frozen"):
        loaded.topic = "elsewhere"


def test_a_pipeline_sink_table_is_the_same_model(tmp_path: Path) -> None:
    config = _pipeline(
        {
            "brokers": "a:1,b:2",
            "topic": "orders_out",
            "key": "order_id",
            "transactional": True,
            "shards": 4,
            "delivery_timeout": 45,
            "unreachable_timeout": "PT2M",
            "headers": {"origin": "region"},
            "librdkafka": {"compression.type": "zstd"},
        }
    ).model_copy(update={"data_dir": tmp_path})
    section = config.sinks["out"]
    assert isinstance(section, KafkaSinkSection)
    assert isinstance(section, KafkaSinkConfig)
    sink = build_sink("out", section, config, tmp_path)
    assert isinstance(sink, KafkaSink)
    assert sink.config == _keywords().config
    assert isinstance(sink.encoder, JsonEncoder)


def test_the_old_names_warn_and_land_on_the_new(tmp_path: Path) -> None:
    file = tmp_path / "old.toml"
    file.write_text('bootstrap_servers = "a:1"\ntopic = "t"\n')
    with pytest.warns(
        DeprecationWarning, match="kafka sink: `bootstrap_servers` is deprecated; write `brokers`"
    ):
        assert load_config(KafkaSinkConfig, file=file, env={}).brokers == ["a:1"]
    with (
        pytest.warns(
            DeprecationWarning, match="`bootstrap_servers` is deprecated; write `brokers`"
        ),
        pytest.warns(DeprecationWarning, match="`message_key` is deprecated; write `key`"),
    ):
        config = _pipeline({"bootstrap_servers": "a:1", "topic": "t", "message_key": "order_id"})
    section = config.sinks["out"]
    assert isinstance(section, KafkaSinkSection)
    assert (section.brokers, section.key) == (["a:1"], "order_id")
    with pytest.raises(
        ValueError, match="`bootstrap_servers` is the old name of `brokers`; got both"
    ):
        _pipeline({"bootstrap_servers": "a:1", "brokers": "a:1", "topic": "t"})


def test_an_old_name_in_a_variable_is_moved_too() -> None:
    env = {"THALWEG_BOOTSTRAP_SERVERS": "a:1", "THALWEG_TOPIC": "t"}
    with pytest.warns(DeprecationWarning, match="`bootstrap_servers` is deprecated"):
        assert load_config(KafkaSinkConfig, env=env).brokers == ["a:1"]


def test_the_credentials_are_secrets_resolved_only_for_the_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKA_PASSWORD", "pw-from-the-environment")
    sink = KafkaSink(
        "a:1",
        "t",
        password="${env:KAFKA_PASSWORD}",
        librdkafka={
            "ssl.key.password": "key-pw-literal",
            "sasl.oauthbearer.client.secret": "oauth-literal",
            "security.protocol": "SASL_SSL",
            "compression.type": "zstd",
        },
    )
    config = sink.config
    assert isinstance(config.password, SecretRef)
    assert isinstance(config.librdkafka["ssl.key.password"], SecretRef)
    assert config.librdkafka["security.protocol"] == "SASL_SSL"  # no credential: plain
    shown = (
        f"{config!r} {config} {config.model_dump()} {config.model_dump(mode='json')} "
        f"{config.model_dump_json()} {sink!r} {sink}"
    )
    for secret in ("pw-from-the-environment", "key-pw-literal", "oauth-literal"):
        assert secret not in shown
    producer = config.producer_config("flow.out", 0)
    assert producer["sasl.password"] == "pw-from-the-environment"  # `password` wins
    assert producer["ssl.key.password"] == "key-pw-literal"
    reader = config.reader_config()
    assert reader["sasl.password"] == "pw-from-the-environment"
    assert reader["sasl.oauthbearer.client.secret"] == "oauth-literal"
    assert "compression.type" not in reader  # a producer-only setting


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (
            'delivery_timeout = "soon"',
            r"`delivery_timeout` in `.*`: expected a valid timedelta.*; got 'soon'",
        ),
        ("metadata_timeout = 0", r"`metadata_timeout` in `.*`: expected greater than 0 seconds"),
        (
            'unreachable_timeout = "-PT1S"',
            r"`unreachable_timeout` in `.*`: expected greater than 0",
        ),
    ],
)
def test_a_bad_duration_is_a_config_error_naming_the_key(
    tmp_path: Path, line: str, match: str
) -> None:
    file = tmp_path / "bad.toml"
    file.write_text(f'brokers = "a:1"\ntopic = "t"\n{line}\n')
    with pytest.raises(ConfigError, match=match):
        load_config(KafkaSinkConfig, file=file, env={})


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"topic": ""}, r"kafka sink: `topic`: expected a non-empty topic name"),
        ({"headers": {"_twg.locator": "x"}}, r"`headers`: names `_twg.locator`"),
        ({"partitioner": "round_robin"}, r"`partitioner` expected 'key' or 'source'"),
        ({"shards": 0}, r"`shards` expected an integer >= 1; got 0"),
        ({"queue_max_bytes": 0}, r"`queue_max_bytes` expected an integer >= 1"),
    ],
)
def test_a_toml_table_is_checked_by_the_rules_of_the_keywords(
    values: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        KafkaSinkConfig.build({"brokers": "a:1", "topic": "t", **values})
