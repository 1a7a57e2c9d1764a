"""The settings base: `THALWEG_*` variables over defaults, errors naming the variable."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field, SecretStr

from thalweg_bytewax.config import Settings
from thalweg_bytewax.errors import ConfigError


class _Example(Settings):
    component = "example"

    bootstrap_servers: str
    topics: list[str] = Field(default_factory=lambda: ["orders"], min_length=1)
    batch_size: int = Field(default=10, ge=1)
    token: SecretStr | None = Field(default=None, min_length=12)


def test_defaults_and_variables() -> None:
    s = _Example.load({"THALWEG_BOOTSTRAP_SERVERS": "h:1", "THALWEG_BATCH_SIZE": ""})
    assert (s.bootstrap_servers, s.topics, s.batch_size) == ("h:1", ["orders"], 10)
    with pytest.raises(ValueError, match="frozen"):
        s.batch_size = 3
    with pytest.raises(ValueError, match="extra"):
        _Example(bootstrap_servers="h:1", brokers="h:2")  # type: ignore[call-arg]


def test_errors_name_every_bad_variable_and_keep_secrets() -> None:
    env = {"THALWEG_BATCH_SIZE": "ten", "THALWEG_TOKEN": "hunter2"}
    with pytest.raises(ConfigError) as info:
        _Example.load(env)
    text = str(info.value)
    assert text.startswith("`example` settings: ")
    assert "`THALWEG_BOOTSTRAP_SERVERS` is required" in text
    assert "`THALWEG_BATCH_SIZE`: expected a valid integer" in text and "got 'ten'" in text
    assert "`THALWEG_TOKEN`" in text and "hunter2" not in text
    assert info.value.__cause__ is None and "hunter2" not in repr(info.value.__context__)
    assert not text.endswith(".")
    assert str(pickle.loads(pickle.dumps(info.value))) == text


@given(st.lists(st.text(st.characters(blacklist_characters=",", blacklist_categories=["Cs"]))))
def test_a_list_variable_is_split_on_commas(parts: list[str]) -> None:
    wanted = [p.strip() for p in parts if p.strip()]
    env = {"THALWEG_BOOTSTRAP_SERVERS": "h:1", "THALWEG_TOPICS": ",".join(parts)}
    if not wanted:
        # An empty list is no list: the default stays, or the bound refuses it.
        if ",".join(parts):
            with pytest.raises(ConfigError, match="THALWEG_TOPICS"):
                _Example.load(env)
        return
    assert _Example.load(env).topics == wanted
