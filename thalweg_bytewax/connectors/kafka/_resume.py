"""Private: the resume state of a Kafka partition and the checks made before resuming.

The state is a plain dict (pickled by Bytewax recovery without a class reference, so it
survives refactors); an ``int`` — the state shape of earlier versions, the next offset
alone — is still accepted. Resume never starts silently in the wrong place: a position
past the partition's end or before its start, a different cluster, a topic deleted and
recreated under the same name (a different topic id), or (through librdkafka's
validation of the stored leader epoch) a log that was truncated or recreated under the
position fails loudly, naming the partition. State written before topic ids were kept
(no ``topic_id``) resumes without that check and stores the id from its next snapshot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from thalweg_bytewax.errors import ConfigError, SourceError

if TYPE_CHECKING:
    from confluent_kafka import KafkaError

__all__ = [
    "KafkaPartitionState",
    "check_resume",
    "make_state",
    "read_state",
    "truncation_message",
]

_FRESH_START = (
    "if the topic was recreated or truncated on purpose, start the flow with a fresh "
    "recovery directory (`python -m bytewax.recovery`) to read it from `starting_offset`"
)


class KafkaPartitionState(TypedDict):
    """Resume state of one topic-partition, as stored in Bytewax recovery.

    Keys: ``next_offset`` (the offset after the last emitted record), ``leader_epoch``
    (the leader epoch of that record, ``None`` before the first one), ``cluster``
    (the cluster id the position belongs to, ``None`` when the cluster reports none)
    and ``topic_id`` (the topic's id, which a topic recreated under the same name does
    not share; ``None`` when the cluster gives none, and in state of earlier versions).
    """

    next_offset: int
    leader_epoch: int | None
    cluster: str | None
    topic_id: str | None


def make_state(
    next_offset: int,
    leader_epoch: int | None,
    cluster: str | None,
    topic_id: str | None = None,
) -> KafkaPartitionState:
    """A resume state; a negative leader epoch (unknown to the client) is stored as None."""
    epoch = leader_epoch if leader_epoch is not None and leader_epoch >= 0 else None
    return {
        "next_offset": next_offset,
        "leader_epoch": epoch,
        "cluster": cluster,
        "topic_id": topic_id,
    }


def read_state(key: str, state: object) -> KafkaPartitionState:
    """Normalise a stored resume state: the current dict or an earlier version's int.

    Raises:
        ConfigError: When the state has neither shape (another source's state under
            this step id).
    """
    if isinstance(state, int) and not isinstance(state, bool) and state >= 0:
        return make_state(state, None, None)
    if isinstance(state, dict):
        offset = state.get("next_offset")
        epoch = state.get("leader_epoch")
        cluster = state.get("cluster")
        topic_id = state.get("topic_id")  # absent in state of earlier versions
        if (
            isinstance(offset, int)
            and not isinstance(offset, bool)
            and offset >= 0
            and (epoch is None or isinstance(epoch, int))
            and (cluster is None or isinstance(cluster, str))
            and (topic_id is None or isinstance(topic_id, str))
        ):
            return make_state(offset, epoch, cluster, topic_id)
    msg = (
        f"kafka source: resume state of partition `{key}` expected an offset or a dict "
        f"with `next_offset`; got {state!r}; was this step id used by another source?"
    )
    raise ConfigError(msg)


def check_resume(
    key: str,
    state: KafkaPartitionState,
    low: int,
    high: int,
    cluster: str | None,
    topic_id: str | None = None,
) -> None:
    """Refuse a resume position the partition cannot have.

    Raises:
        SourceError: When the position is from another cluster or another topic of
            the same name (a different topic id: deleted and recreated), past the end
            (the topic was recreated or its log truncated) or before the start
            (retention deleted records never read).
    """
    offset = state["next_offset"]
    if state["cluster"] is not None and cluster is not None and state["cluster"] != cluster:
        msg = (
            f"kafka source: resume state of partition `{key}` belongs to cluster "
            f"`{state['cluster']}`; got cluster `{cluster}`; offsets do not carry over "
            f"between clusters: point `brokers` at the original cluster, or {_FRESH_START}"
        )
        raise SourceError(msg)
    stored_id = state["topic_id"]
    if stored_id is not None and topic_id is not None and stored_id != topic_id:
        msg = (
            f"kafka source: partition `{key}` cannot resume at offset {offset}: its state "
            f"belongs to topic id `{stored_id}`; got topic id `{topic_id}` (the topic was "
            f"deleted and recreated under the same name, so its offsets are another "
            f"topic's and records may be missing); {_FRESH_START}"
        )
        raise SourceError(msg)
    if offset > high:
        msg = (
            f"kafka source: partition `{key}` cannot resume at offset {offset}: expected "
            f"at most its end offset; got end {high} (the topic was recreated or its log "
            f"truncated, so records may be missing); {_FRESH_START}"
        )
        raise SourceError(msg)
    if offset < low:
        msg = (
            f"kafka source: partition `{key}` cannot resume at offset {offset}: expected "
            f"at least its earliest offset; got earliest {low} (retention deleted "
            f"{low - offset} records before they were read); raise the topic's retention "
            f"or {_FRESH_START}"
        )
        raise SourceError(msg)


def truncation_message(key: str, offset: int, epoch: int | None, err: KafkaError) -> str:
    """The error text for a position librdkafka found truncated or out of range."""
    return (
        f"kafka source: partition `{key}` cannot continue at offset {offset} (leader "
        f"epoch {epoch}): the broker's log no longer holds it ({err.name()}: the topic "
        f"was recreated or its log truncated, so records may be missing); {_FRESH_START}"
    )
