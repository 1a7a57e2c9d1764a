"""Private: the resume state of a Kafka partition and the checks made before resuming.

The state is a plain dict (pickled by Bytewax recovery without a class reference, so it
survives refactors); an ``int`` — the state shape of earlier versions, the next offset
alone — is still accepted. Resume never starts silently in the wrong place: a position
past the partition's end or before its start, a different cluster, or (through
librdkafka's validation of the stored leader epoch) a log that was truncated or
recreated under the position fails loudly, naming the partition.
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
    (the leader epoch of that record, ``None`` before the first one) and ``cluster``
    (the cluster id the position belongs to, ``None`` when the cluster reports none).
    """

    next_offset: int
    leader_epoch: int | None
    cluster: str | None


def make_state(
    next_offset: int, leader_epoch: int | None, cluster: str | None
) -> KafkaPartitionState:
    """A resume state; a negative leader epoch (unknown to the client) is stored as None."""
    epoch = leader_epoch if leader_epoch is not None and leader_epoch >= 0 else None
    return {"next_offset": next_offset, "leader_epoch": epoch, "cluster": cluster}


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
        if (
            isinstance(offset, int)
            and not isinstance(offset, bool)
            and offset >= 0
            and (epoch is None or isinstance(epoch, int))
            and (cluster is None or isinstance(cluster, str))
        ):
            return make_state(offset, epoch, cluster)
    msg = (
        f"kafka source: resume state of partition `{key}` expected an offset or a dict "
        f"with `next_offset`; got {state!r}; was this step id used by another source?"
    )
    raise ConfigError(msg)


def check_resume(
    key: str, state: KafkaPartitionState, low: int, high: int, cluster: str | None
) -> None:
    """Refuse a resume position the partition cannot have.

    Raises:
        SourceError: When the position is past the end (the topic was recreated or
            its log truncated), before the start (retention deleted records never
            read) or from another cluster.
    """
    offset = state["next_offset"]
    if state["cluster"] is not None and cluster is not None and state["cluster"] != cluster:
        msg = (
            f"kafka source: resume state of partition `{key}` belongs to cluster "
            f"`{state['cluster']}`; got cluster `{cluster}`; offsets do not carry over "
            f"between clusters: point `brokers` at the original cluster, or {_FRESH_START}"
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
