"""A misspelt enum value is a ``ConfigError`` naming the argument and listing the valid ones.

Everywhere a public argument takes an enum or a fixed set of strings, never a raw
``ValueError`` from the enum constructor.
"""

from __future__ import annotations

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource

import thalweg_bytewax.operators as twg
from thalweg_bytewax._choices import check_choice, parse_enum
from thalweg_bytewax.contracts import ContractMode
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import MetadataColumns, MetadataPolicy


def _stream() -> op.KeyedStream[pa.RecordBatch]:
    flow = Dataflow("choices")
    return op.input("inp", flow, TestingSource[tuple[str, pa.RecordBatch]]([]))


def test_validate_mode_strcit_names_the_argument_and_the_choices() -> None:
    with pytest.raises(
        ConfigError,
        match=r"^validate `choices.v`: expected mode `strict`, `quarantine` or `annotate`; got 'strcit'$",
    ):
        twg.validate("v", _stream(), None, mode="strcit")


def test_metadata_policy_columns_refuse_an_unknown_policy() -> None:
    with pytest.raises(
        ConfigError, match=r"^metadata: expected policy `none`, `locator` or `all`; got 'some'$"
    ):
        MetadataColumns().policy_columns("some")
    assert MetadataColumns().policy_columns("none") == []


def test_the_helpers_accept_members_values_and_nothing_else() -> None:
    assert parse_enum(ContractMode, "strict", where="w", argument="a") is ContractMode.STRICT
    assert parse_enum(MetadataPolicy, MetadataPolicy.ALL, where="w", argument="a") is (
        MetadataPolicy.ALL
    )
    with pytest.raises(ConfigError, match=r"^w: expected a `strict`, .*; got \['strict'\]$"):
        parse_enum(ContractMode, ["strict"], where="w", argument="a")  # unhashable
    assert check_choice("x", ("x", "y"), where="w", argument="a") == "x"
    with pytest.raises(ConfigError, match=r"^w: expected a `x` or `y`; got 1$"):
        check_choice(1, ("x", "y"), where="w", argument="a")
    with pytest.raises(ConfigError, match=r"^w: expected a `x`; got 'y'$"):
        check_choice("y", ("x",), where="w", argument="a")
