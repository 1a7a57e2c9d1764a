"""require_columns: a step's check that a batch has the columns it reads."""

from __future__ import annotations

import pyarrow as pa
import pytest

from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.records.required_columns import require_columns

BATCH = pa.RecordBatch.from_pydict({"a": [1], "b": [2]})


def test_a_batch_with_every_column_passes() -> None:
    require_columns(BATCH, ["b", "a"], where="dedup")
    require_columns(BATCH, [], where="dedup")


def test_the_missing_columns_are_named_in_order_with_the_batch_columns() -> None:
    with pytest.raises(ConfigError) as caught:
        require_columns(BATCH, ["z", "a", "y"], where="dedup", kind="key")
    assert str(caught.value) == (
        "dedup: expected key column(s) ['z', 'y'] in the batch; got ['a', 'b']"
    )


def test_without_a_kind_and_with_a_hint() -> None:
    with pytest.raises(ConfigError) as caught:
        require_columns(BATCH, ["amount"], where="window", hint=". Check `group_by`")
    assert str(caught.value) == (
        "window: expected column(s) ['amount'] in the batch; got ['a', 'b']. Check `group_by`"
    )


def test_the_error_raised_is_the_one_asked_for() -> None:
    with pytest.raises(SchemaError, match=r"wasm_map `s`: expected argument column\(s\)"):
        require_columns(BATCH, ["c"], where="wasm_map `s`", kind="argument", error=SchemaError)
