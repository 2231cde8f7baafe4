"""Which topics and partitions a query reads, decided over the cluster's metadata (``topic ->
partition count``): ``subscribe``, ``subscribePattern`` or ``assign``, and the errors that
name the missing topic or partition, the cluster and the fix. Pure: :class:`~.cluster.KafkaCluster`
fetches the metadata."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from spark_kafka_group.errors import OptionError, TopicNotFoundError
from spark_kafka_group.group.metadata import TopicPartition


def is_internal_topic(name: str) -> bool:
    """Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``, ...)."""
    return name.startswith("__")


def select_topics(
    counts: Mapping[str, int],
    servers: str,
    *,
    subscribe: Sequence[str] | None = None,
    pattern: str | None = None,
    assign: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, int]:
    """``topic -> partition count`` for exactly one of subscribe / pattern / assign, out of
    the cluster's ``counts`` (``servers`` names the cluster in errors).

    * ``subscribe``: every listed topic must exist (TopicNotFoundError otherwise).
    * ``pattern``: regular expression that must match the whole topic name; internal
      topics (``__...``) are never matched. No match is not an error (empty dict).
    * ``assign``: every listed partition must exist (TopicNotFoundError with numbers).
    """
    given = [x is not None for x in (subscribe, pattern, assign)]
    if sum(given) != 1:
        raise OptionError("Exactly one of 'subscribe', 'subscribePattern' and 'assign' must be set")
    if pattern is not None:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise OptionError(
                f"subscribePattern {pattern!r} is not a valid regular expression: {exc}"
            ) from None
        return {
            name: counts[name]
            for name in sorted(counts)
            if not is_internal_topic(name) and regex.fullmatch(name)
        }
    if subscribe is not None:
        topics = list(dict.fromkeys(subscribe))
        missing = [t for t in topics if t not in counts]
        if missing:
            raise topic_not_found(missing, counts, servers)
        return {t: counts[t] for t in topics}
    assert assign is not None
    result: dict[str, int] = {}
    for topic, partitions in assign.items():
        if topic not in counts:
            raise topic_not_found([topic], counts, servers)
        count = counts[topic]
        bad = sorted({int(p) for p in partitions if not 0 <= int(p) < count})
        if bad:
            raise TopicNotFoundError(
                f"assign lists partition(s) {bad} of topic {topic!r}, which has {count} "
                f"partition(s) (0..{count - 1}) on Kafka cluster {servers!r}. "
                "Fix the 'assign' option."
            )
        result[topic] = count
    return result


def topic_not_found(
    missing: list[str], counts: Mapping[str, int], servers: str
) -> TopicNotFoundError:
    visible = sorted(t for t in counts if not is_internal_topic(t))
    shown = ", ".join(visible[:20]) + (" ..." if len(visible) > 20 else "")
    names = ", ".join(repr(t) for t in missing)
    return TopicNotFoundError(
        f"Topic(s) {names} not found on Kafka cluster {servers!r} "
        f"(visible topics: {shown or 'none'}). Create the topic, fix the name in "
        "'subscribe'/'assign', or check that the credentials may describe it (ACLs)."
    )


def check_partitions_exist(
    tps: Sequence[TopicPartition], counts: Mapping[str, int], servers: str
) -> None:
    """TopicNotFoundError if a topic of ``tps`` is missing or a partition is past its count."""
    missing_topics = sorted({t for t, _ in tps if t not in counts})
    if missing_topics:
        raise topic_not_found(missing_topics, counts, servers)
    bad = [(t, p) for t, p in tps if not 0 <= p < counts[t]]
    if bad:
        t, p = bad[0]
        raise TopicNotFoundError(
            f"Partition {p} of topic {t!r} does not exist on Kafka cluster {servers!r}: the "
            f"topic has {counts[t]} partition(s). Was the topic deleted and re-created with "
            "fewer partitions?"
        )
