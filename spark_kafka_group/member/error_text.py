"""What the group member tells its user when the group refuses or drops it: the text of its
errors, each naming the setting or the other query involved and the fix."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from spark_kafka_group.errors import OptionError
from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupError,
    GroupMetadata,
    GroupState,
    TopicPartition,
)
from spark_kafka_group.group.clocks import Sightings
from spark_kafka_group.group.metadata import partition_name
from spark_kafka_group.options import GroupSettings

log = logging.getLogger(__name__)


def names(partitions: Iterable[TopicPartition]) -> str:
    """Partitions as people read them: ``t-0, t-1``."""
    return ", ".join(partition_name(t, p) for t, p in sorted(partitions)) or "(none)"


def fenced(member_id: str, group_id: str, instance_id: str | None) -> tuple[str, str]:
    """Why a fenced member lost its partitions, and its error's text."""
    if instance_id is None:
        return "replaced by a restart of its query", (
            f"Member {member_id} of group {group_id!r} was fenced: its query was "
            "restarted from the same checkpoint and the new run took over its "
            "partitions. Run one query per checkpoint location."
        )
    return "fenced: another member took over its groupInstanceId", (
        f"Member {member_id} of group {group_id!r} was fenced: another query "
        f"joined with the same groupInstanceId {instance_id!r}. Give every "
        "concurrently running query its own groupInstanceId."
    )


def join_failure(
    error: GroupError, settings: GroupSettings, coordinator: GroupCoordinator
) -> OptionError | None:
    """The error that stops a member whose join the group refused for good (its session
    timeout, or no protocol in common with the group), or None (a refusal worth retrying is
    logged)."""
    group_id = settings.group_id
    if error is GroupError.INVALID_SESSION_TIMEOUT:
        timeout_ms = settings.session_timeout_ms
        return OptionError(invalid_session_timeout(group_id, timeout_ms, coordinator.config))
    if error is GroupError.INCONSISTENT_GROUP_PROTOCOL:
        group, protocols = coordinator.group, settings.protocol_names
        return OptionError(inconsistent_protocol(group_id, group, protocols))
    if error not in (GroupError.NONE, GroupError.REBALANCE_IN_PROGRESS):
        log.warning("group %s: join answered %s; retrying", group_id, error)
    return None


def invalid_session_timeout(group_id: str, session_timeout_ms: int, config: GroupConfig) -> str:
    return (
        f"Group {group_id!r} refused sessionTimeoutMs={session_timeout_ms}: it must be between "
        f"{config.min_session_timeout_ms} and {config.max_session_timeout_ms} ms (Kafka's "
        "group.min/max.session.timeout.ms)."
    )


def inconsistent_protocol(group_id: str, group: GroupMetadata, protocols: tuple[str, ...]) -> str:
    supported = sorted(group.candidate_protocols())
    return (
        f"Group {group_id!r} refused this query: its members all support only "
        f"{', '.join(supported) or '(none)'} (it uses {group.protocol!r}), and this "
        f"query's assignmentStrategy {','.join(protocols)!r} has none "
        "of them. Members of one group need an assignor in common. To move a running "
        "group to another assignor, restart each query with the new one first and the "
        "old one second (e.g. 'cooperative-sticky,range'), then each again with the new "
        "one alone."
    )


def join_timeout(
    settings: GroupSettings, member_id: str, group: GroupMetadata, seen: Sightings, wait_ms: int
) -> str:
    """A member that had to complete its join (Trigger.AvailableNow) did not: which members
    the group waits for, and why."""
    laggards = []
    for m in group.members.values():
        if m.member_id == member_id:
            continue
        if group.state == GroupState.PREPARING_REBALANCE and not m.joined:
            silent_s = (seen.now_ms - seen.heard_ms(m)) / 1000
            laggards.append(
                f"{m.member_id} (did not rejoin; silent for {silent_s:.0f} s, its session "
                f"timeout of {m.profile.session_timeout_ms / 1000:.0f} s expires it)"
            )
        elif group.state == GroupState.COMPLETING_REBALANCE and m.member_id == group.leader:
            laggards.append(f"{m.member_id} (leader, did not assign)")
        elif m.revoking:
            laggards.append(f"{m.member_id} (did not release {len(m.revoking)} partitions)")
    return (
        f"Group {settings.group_id!r} did not give member {member_id} a stable "
        f"assignment within {wait_ms / 1000:.0f} s (rebalanceTimeoutMs "
        f"{settings.rebalance_timeout_ms} + sessionTimeoutMs {settings.session_timeout_ms}); "
        f"the group is {group.state.value}. Members that did not rejoin: "
        f"{', '.join(laggards) or '(none: the group log could not be written)'}. "
        "A Trigger.AvailableNow run reads only what it is assigned, so it stops here "
        "rather than end having read nothing. Stop those queries or wait for them to "
        "expire; or give this run a rebalanceTimeoutMs + sessionTimeoutMs longer than "
        "their session timeout (use the same timeouts for every query of the group)."
    )
