"""Every registry encoder refuses a record-name subject strategy it cannot name a record for."""

from __future__ import annotations

import uuid

import pytest

from thalweg_bytewax.codecs import AvroEncoder, JsonEncoder, ProtobufEncoder
from thalweg_bytewax.errors import ConfigError


@pytest.mark.parametrize(
    ("make", "needs"),
    [
        (lambda url, **kw: AvroEncoder(url, **kw), "`schema=`"),
        (lambda url, **kw: JsonEncoder(url, framing="confluent", **kw), "`schema=`"),
        (lambda url, **kw: ProtobufEncoder(url, **kw), "`descriptor_set=` or `message_type=`"),
    ],
    ids=["avro", "json", "protobuf"],
)
@pytest.mark.parametrize("strategy", ["record", "topic_record"])
def test_a_record_strategy_without_a_record_name_is_refused_unless_a_subject_is_fixed(
    make, needs, strategy
) -> None:
    url = f"mock://record-name-{uuid.uuid4().hex}"
    with pytest.raises(ConfigError, match=rf"subject_strategy '{strategy}' expected {needs}"):
        make(url, subject_strategy=strategy)
    make(url, subject_strategy=strategy, subject="fixed-value")  # a fixed subject needs none
    make(url)  # the topic strategy names subjects by topic
