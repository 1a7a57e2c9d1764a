"""A KafkaSource's settings are one frozen model, whether from keywords, TOML or variables."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from thalweg_bytewax.config import SecretRef, load_config
from thalweg_bytewax.connectors.kafka import KafkaSource, KafkaSourceConfig
from thalweg_bytewax.errors import ConfigError


def test_keywords_and_a_toml_file_build_the_same_model(tmp_path: Path) -> None:
    file = tmp_path / "kafka.toml"
    file.write_text(
        'brokers = "a:1,b:2"\ntopics = ["orders"]\nmetadata_timeout = 5\n'
        'unreachable_timeout = "PT2M"\n[librdkafka]\n"fetch.min.bytes" = 1\n'
    )
    loaded = load_config(KafkaSourceConfig, file=file, env={})
    built = KafkaSource(
        ["a:1", "b:2"],
        "orders",
        metadata_timeout=timedelta(seconds=5),
        unreachable_timeout=timedelta(minutes=2),
        librdkafka={"fetch.min.bytes": 1},
    ).config
    assert built == loaded
    assert loaded.metadata_timeout == timedelta(seconds=5)
    assert KafkaSource.from_config(loaded).config is loaded


def test_a_duration_keyword_still_takes_a_timedelta_only() -> None:
    with pytest.raises(ConfigError, match="kafka source: `metadata_timeout` expected a positive"):
        KafkaSource("a:1", "t", metadata_timeout=5)  # type: ignore[arg-type]


def test_the_old_names_warn_and_land_on_the_new(tmp_path: Path) -> None:
    with pytest.warns(DeprecationWarning, match="`add_config` is deprecated; pass `librdkafka`"):
        source = KafkaSource("a:1", "t", add_config={"fetch.min.bytes": 1})
    assert source.config.librdkafka == {"fetch.min.bytes": 1}
    file = tmp_path / "old.toml"
    file.write_text('bootstrap_servers = "a:1"\n')
    with pytest.warns(
        DeprecationWarning, match="`bootstrap_servers` is deprecated; write `brokers`"
    ):
        assert load_config(KafkaSourceConfig, file=file, env={}).brokers == ["a:1"]


def test_the_sasl_password_is_a_secret_resolved_only_for_the_consumer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKA_PASSWORD", "pw-from-the-environment")
    config = load_config(
        KafkaSourceConfig,
        env={"THALWEG_BROKERS": "a:1", "THALWEG_PASSWORD": "${env:KAFKA_PASSWORD}"},
    )
    assert isinstance(config.password, SecretRef)
    shown = f"{config!r} {config} {config.model_dump_json()} {config.model_dump(mode='json')}"
    assert "pw-from-the-environment" not in shown
    assert "${env:KAFKA_PASSWORD}" in shown
    assert config.consumer_config()["sasl.password"] == "pw-from-the-environment"


def test_credentials_in_librdkafka_settings_are_secrets_too() -> None:
    source = KafkaSource(
        "a:1",
        "t",
        librdkafka={"ssl.key.password": "key-pw-literal", "sasl.oauthbearer.client.secret": "s3"},
        password="sasl-pw-literal",
    )
    config = source.config
    assert all(isinstance(v, SecretRef) for v in config.librdkafka.values())
    assert "literal" not in f"{config!r} {config.model_dump_json()}"
    consumer = config.consumer_config()
    assert (consumer["ssl.key.password"], consumer["sasl.password"]) == (
        "key-pw-literal",
        "sasl-pw-literal",
    )


def test_librdkafka_settings_that_name_no_credential_stay_plain_values() -> None:
    # `thalweg config secrets` lists every secret; a protocol or a user name is none.
    config = KafkaSource(
        "a:1",
        "t",
        librdkafka={
            "security.protocol": "SASL_SSL",
            "sasl.username": "thalweg",
            "fetch.min.bytes": 5,
            "sasl.password": "pw-literal",
        },
    ).config
    plain = {k: v for k, v in config.librdkafka.items() if not isinstance(v, SecretRef)}
    assert plain == {
        "security.protocol": "SASL_SSL",
        "sasl.username": "thalweg",
        "fetch.min.bytes": 5,
    }
    assert isinstance(config.librdkafka["sasl.password"], SecretRef)
