"""Private: topic ids (KIP-516), which tell a topic from one recreated under its name.

A topic deleted and created again under the same name starts its offsets (and often
its leader epochs) from zero again, so a stored position can look valid in the new
topic; its id differs. confluent-kafka's metadata call does not return ids, so they
are asked with the admin API's DescribeTopics, once per listing for all the source's
topics. A cluster without ids (brokers before Kafka 2.8, librdkafka's mock cluster)
gives none, and resumed positions are then checked without them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, ClusterMetadata  # type: ignore[attr-defined]

from ._config import BOOTSTRAP_SERVERS, LOG_LEVEL

__all__ = ["describe_topic_ids"]

logger = logging.getLogger(__name__)

# Settings a consumer's configuration shares with an admin client (connection and
# security); the others are consumer-only and would be warned about.
_SHARED_PREFIXES = ("security.", "sasl.", "ssl.", "client.", "socket.")


def _admin_config(brokers: Sequence[str], add_config: Mapping[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {BOOTSTRAP_SERVERS: ",".join(brokers), LOG_LEVEL: 3}
    config.update({k: v for k, v in add_config.items() if k.startswith(_SHARED_PREFIXES)})
    return config


def describe_topic_ids(
    brokers: Sequence[str],
    add_config: Mapping[str, Any],
    topics: Sequence[str],
    metadata: ClusterMetadata,
    timeout_s: float,
) -> dict[str, str | None]:
    """The id of each topic (base64, as Kafka's tools print it), or None where there is none.

    ``metadata`` is a metadata answer of the same cluster: DescribeTopics goes to the
    controller it names, so a cluster naming none among its brokers (librdkafka's mock
    cluster) is not asked. A failed request is logged (WARNING) and gives None: the
    resume is then checked by offsets and leader epochs only, as without ids.
    """
    ids: dict[str, str | None] = dict.fromkeys(topics)
    if metadata.controller_id not in metadata.brokers:
        logger.info(
            "kafka source: the cluster names no controller among its brokers; topic ids "
            "are not asked and a recreated topic is told by offsets and leader epochs only"
        )
        return ids
    admin = AdminClient(_admin_config(brokers, add_config))
    futures = admin.describe_topics(TopicCollection(list(topics)), request_timeout=timeout_s)
    for topic, future in futures.items():
        try:
            desc = future.result(timeout=timeout_s + 1)
        except (KafkaException, TimeoutError) as exc:
            logger.warning(
                "kafka source: could not read the id of topic `%s` (%s); a resumed "
                "partition of it is checked by offsets and leader epochs only",
                topic,
                exc,
            )
            continue
        uid = desc.topic_id
        if uid is not None and (
            uid.get_most_significant_bits() or uid.get_least_significant_bits()
        ):
            ids[topic] = str(uid)
    return ids
