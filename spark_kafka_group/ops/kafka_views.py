"""``kafka-group describe`` and ``list`` printed as ``kafka-consumer-groups`` prints them.

Same columns, same names, same widths, same ``-`` for a missing value, so that scripts which
parse Kafka's output parse these too. Where the product differs, the column keeps Kafka's
name and says the product's nearest thing: COORDINATOR (ID) is the group log (its URI and log
version), since a group log has no coordinator broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from spark_kafka_group.group import GroupDescription
from spark_kafka_group.ops.lag import GroupLag, PartitionLag

#: Kafka's MISSING_COLUMN_VALUE.
MISSING = "-"


def _cell(value: object) -> str:
    return MISSING if value is None or value == "" else str(value)


def _left(width: int) -> str:
    return "%-" + str(width) + "s"


def offsets_view(report: GroupLag) -> str:
    """``--describe [--offsets]``: one row per partition a member holds or the group has
    committed (Kafka's rule), members with most partitions first, then partitions without an
    owner (CONSUMER-ID ``-``)."""
    group = report.group
    rows_by_tp = {(p.topic, p.partition): p for p in report.partitions}
    members = sorted(group.members, key=lambda m: -len(m.assignment) - len(m.revoking))
    rows: list[tuple[PartitionLag, str | None, str | None, str | None]] = []
    shown: set[tuple[str, int]] = set()
    for m in members:
        for tp in sorted({*m.assignment, *m.revoking}):
            row = rows_by_tp.get((tp.topic, tp.partition))
            if row is not None and (tp.topic, tp.partition) not in shown:
                shown.add((tp.topic, tp.partition))
                rows.append((row, m.member_id, m.client_host, m.client_id))
    for key, row in sorted(rows_by_tp.items()):
        if key not in shown and row.committed is not None:
            rows.append((row, None, None, None))
    group_w = max([15, len(group.group_id)])
    topic_w = max([15, *(len(r.topic) for r, *_ in rows)])
    consumer_w = max([15, *(len(_cell(c)) for _, c, _, _ in rows)])
    host_w = max([15, *(len(_cell(h)) for _, _, h, _ in rows)])
    widths = [_left(group_w), _left(topic_w), "%-10s", "%-15s", "%-15s", "%-15s"]
    fmt = " ".join([*widths, _left(consumer_w), _left(host_w), "%s"])
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")
    lines = ["", fmt % (*header, "CONSUMER-ID", "HOST", "CLIENT-ID")]
    for r, consumer, host, client in rows:
        cells = (group.group_id, r.topic, r.partition, r.committed, r.log_end, r.lag)
        lines.append(fmt % (*map(_cell, cells), _cell(consumer), _cell(host), _cell(client)))
    return "\n".join(lines)


def members_view(group: GroupDescription, *, verbose: bool) -> str:
    """``--describe --members [--verbose]``."""
    members = group.members
    instances = any(m.instance_id for m in members)
    widths = [
        max([15, len(group.group_id)]),
        max([15, *(len(m.member_id) for m in members)]),
        max([17, *(len(m.instance_id or "") for m in members)]),
        max([15, *(len(m.client_host) for m in members)]),
        max([15, *(len(m.client_id) for m in members)]),
    ]
    if not instances:
        del widths[2]
    fmt = " ".join(_left(w) for w in widths) + " %-15s "
    header = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if instances else [])]
    header += ["HOST", "CLIENT-ID", "#PARTITIONS"]
    lines = ["", fmt % tuple(header) + ("ASSIGNMENT" if verbose else "")]
    for m in members:
        cells = [group.group_id, m.member_id, *([m.instance_id or ""] if instances else [])]
        cells += [m.client_host, m.client_id, str(len(m.assignment))]
        line = fmt % tuple(cells)
        if verbose:
            line += _assignment(m.assignment)
        lines.append(line.rstrip())
    return "\n".join(lines)


def _assignment(partitions: Iterable[tuple[str, int]]) -> str:
    """``topic(0,1,2), other(3)``, or ``-``."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return MISSING
    return ", ".join(
        f"{topic}({','.join(str(p) for p in sorted(ps))})" for topic, ps in sorted(by_topic.items())
    )


def state_view(group: GroupDescription) -> str:
    """``--describe --state`` (Kafka's widths: the first column is as wide as the
    coordinator's). COORDINATOR (ID) is the group log: its URI and log version."""
    coordinator = f"{group.uri}  ({group.version})"
    fmt = _left(max(25, len(coordinator), len(group.group_id))) + " %-25s %-20s %-15s %s"
    header = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
    row = (group.group_id, coordinator, _cell(group.protocol), group.state.value)
    return "\n".join(["", fmt % header, fmt % (*row, len(group.members))])


def group_notice(group: GroupDescription) -> str | None:
    """What Kafka prints on stderr before a group's rows: no members, or rebalancing."""
    state = group.state.value
    if state == "Empty":
        return f"\nConsumer group '{group.group_id}' has no active members."
    if state in ("PreparingRebalance", "CompletingRebalance"):
        return f"\nWarning: Consumer group '{group.group_id}' is rebalancing."
    return None


def list_view(groups: Sequence[GroupDescription], *, state: bool) -> str:
    """``--list`` (names) or ``--list --state`` (GROUP and STATE columns)."""
    if not state:
        return "\n".join(g.group_id for g in groups)
    width = max([15, *(len(g.group_id) for g in groups)]) + 10
    fmt = _left(width) + " %-20s"
    lines = [fmt % ("GROUP", "STATE")]
    lines += [fmt % (g.group_id, g.state.value) for g in groups]
    return "\n".join(line.rstrip() for line in lines)


def reset_view(plans: dict[str, dict[tuple[str, int], int]]) -> str:
    """``--reset-offsets``: Kafka's GROUP TOPIC PARTITION NEW-OFFSET table."""
    fmt = "%-30s %-30s %-10s %-15s"
    lines = ["", fmt % ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
    for group, plan in plans.items():
        for (topic, partition), offset in sorted(plan.items()):
            lines.append(fmt % (group, topic, partition, offset))
    return "\n".join(line.rstrip() for line in lines)


#: The STATUS Kafka prints for each partition-level error of --delete-offsets (the exception
#: its admin client raises: class and message).
_DELETE_OFFSETS_ERRORS = {
    "GROUP_SUBSCRIBED_TO_TOPIC": "org.apache.kafka.common.errors.GroupSubscribedToTopicException: "
    "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed "
    "to it.",
    "UNKNOWN_TOPIC_OR_PARTITION": "org.apache.kafka.common.errors."
    "UnknownTopicOrPartitionException: This server does not host this topic-partition.",
    "GROUP_ID_NOT_FOUND": "org.apache.kafka.common.errors.GroupIdNotFoundException: The group "
    "id does not exist.",
    "NON_EMPTY_GROUP": "org.apache.kafka.common.errors.GroupNotEmptyException: The group is "
    "not empty.",
}


def delete_offsets_view(group_id: str, statuses: Mapping[tuple[str, int], str]) -> str:
    """``--delete-offsets``: Kafka's verdict line, then TOPIC PARTITION STATUS, one row per
    partition (``Successful`` or ``Error: <exception>: <message>``; ``-`` for the partition
    of a whole unknown topic), in Kafka's order (topic and partition as one string). The
    verdict is an error when a partition the request named was refused; a topic unknown as a
    whole was never asked about (Kafka's tool finds it out first)."""
    asked_failed = any(
        status != "NONE" and partition >= 0 for (_, partition), status in statuses.items()
    )
    if asked_failed:
        lines = ["", "Error: Encountered some partition-level error, see the follow-up details."]
    else:
        lines = [f"Request succeeded for deleting offsets from group {group_id}."]
    width = max([15, *(len(topic) for topic, _ in statuses)])
    fmt = _left(width) + " %-10s %-15s"
    lines += ["", fmt % ("TOPIC", "PARTITION", "STATUS")]
    for (topic, partition), status in sorted(
        statuses.items(), key=lambda kv: f"{kv[0][0]}{kv[0][1]}"
    ):
        shown = (
            "Successful"
            if status == "NONE"
            else "Error: " + _DELETE_OFFSETS_ERRORS.get(status, status)
        )
        lines.append(fmt % (topic, partition if partition >= 0 else MISSING, shown))
    return "\n".join(line.rstrip() for line in lines)
