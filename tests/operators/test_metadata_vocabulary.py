"""One vocabulary for metadata: `metadata_prefix` names the prefix, `metadata=` a policy."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource

import thalweg_bytewax.operators as twg
from tests.helpers import run_flow
from thalweg_bytewax.codecs import AvroCodec, JsonCodec, ProtobufCodec
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.batches import raw_batch_from_columns
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns, MetadataPolicy

PREFIXED: list[Callable[..., Any]] = [
    KafkaSource.__init__,
    ParquetSink.__init__,
    AvroCodec.__init__,
    ProtobufCodec.__init__,
    JsonCodec.__init__,
    twg.decode,
    twg.dedup,
    twg.validate,
    twg.to_dicts,
    twg.to_raw_records,
]


@pytest.mark.parametrize("fn", PREFIXED, ids=lambda f: f.__qualname__)
def test_the_prefix_argument_has_one_name(fn: Callable[..., Any]) -> None:
    params = inspect.signature(fn).parameters
    assert "metadata_prefix" in params
    assert params["metadata_prefix"].default == DEFAULT_PREFIX
    assert params["metadata_prefix"].kind is inspect.Parameter.KEYWORD_ONLY
    assert not {"columns", "prefix"} & set(params), "one spelling: `metadata_prefix`"


@pytest.mark.parametrize("fn", [twg.decode, twg.to_dicts], ids=lambda f: f.__qualname__)
def test_metadata_is_a_policy_wherever_it_is_an_argument(fn: Callable[..., Any]) -> None:
    default = inspect.signature(fn).parameters["metadata"].default
    assert isinstance(default, MetadataPolicy)


def _raw(columns: MetadataColumns) -> pa.RecordBatch:
    return raw_batch_from_columns(
        topic="orders",
        partition=3,
        offsets=[10, 11],
        keys=[b"k0", b"k1"],
        values=[b"v0", b"v1"],
        cluster="test",
        columns=columns,
    )


def _decoded(columns: MetadataColumns) -> pa.RecordBatch:
    # A decoded batch: payload columns, then every metadata column but the raw bytes.
    raw = _raw(columns)
    meta = columns.policy_columns(MetadataPolicy.ALL)
    payload = pa.RecordBatch.from_pydict({"id": [1, 2]})
    return pa.RecordBatch.from_arrays(
        [*payload.columns, *(raw.column(n) for n in meta)], names=["id", *meta]
    )


@pytest.mark.parametrize(
    ("metadata", "kept"),
    [
        ("none", []),
        (MetadataPolicy.LOCATOR, ["source_topic", "source_partition", "source_offset", "record_id"]),
        ("all", None),
    ],
)
def test_to_dicts_keeps_the_metadata_its_policy_names(
    metadata: str | MetadataPolicy, kept: list[str] | None
) -> None:
    cols = MetadataColumns("_x_")
    batch = _decoded(cols)
    out: list[tuple[str, dict[str, Any]]] = run_flow(
        [("orders:3", batch)],
        lambda up: twg.to_dicts("dicts", up, metadata=metadata, metadata_prefix="_x_"),
        flow_id="to_dicts_policy",
    )["out"]
    assert [k for k, _ in out] == ["orders:3", "orders:3"]
    expected = batch.schema.names if kept is None else ["id", *(f"_x_{n}" for n in kept)]
    assert list(out[0][1]) == expected
    assert out[1][1]["id"] == 2


def test_to_raw_records_reads_a_non_default_prefix() -> None:
    cols = MetadataColumns("_x_")
    out: list[tuple[str, Any]] = run_flow(
        [("orders:3", _raw(cols))],
        lambda up: twg.to_raw_records("records", up, metadata_prefix="_x_"),
        flow_id="to_records_prefix",
    )["out"]
    assert [(r.locator.offset, r.value) for _, r in out] == [(10, b"v0"), (11, b"v1")]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"metadata": "strcit"}, r"to_dicts `\S*dicts`: expected metadata 'none', 'locator'"),
        ({"metadata": True}, r"to_dicts `\S*dicts`: expected metadata"),
        ({"metadata_prefix": "1bad"}, r"to_dicts `\S*dicts`: `metadata_prefix` expected"),
    ],
)
def test_to_dicts_refuses_a_bad_policy_or_prefix(kwargs: dict[str, Any], match: str) -> None:
    flow = Dataflow("to_dicts_bad")
    empty: list[tuple[str, pa.RecordBatch]] = []
    up = op.input("inp", flow, TestingSource(empty))
    with pytest.raises(ConfigError, match=match):
        twg.to_dicts("dicts", up, **kwargs)
