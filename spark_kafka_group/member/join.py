"""Joining the group: the member's id and join request, how often it reads the log while the
group rebalances, and the wait for its first assignment (a Kafka consumer's first poll).

Every wait here counts on the injected clock (a test clock moves instead of blocking).
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from spark_kafka_group.group import JoinRequest
from spark_kafka_group.group.timer import Clock
from spark_kafka_group.member.view import Holdings
from spark_kafka_group.options import GroupSettings

#: While the group rebalances, the member reads the log this often instead of every heartbeat
#: interval (a Kafka member's JoinGroup and SyncGroup are long polls answered at once; this is
#: ours)...
REBALANCE_POLL_MS = 100
#: ...and each member of a large group less often, so that the whole group reads the log at
#: most this many times a second whatever its size (capped at the heartbeat interval).
GROUP_READS_PER_S = 100


def rebalance_poll_ms(members: int, heartbeat_interval_ms: int) -> int:
    """How often a member reads the log while its group rebalances."""
    return max(REBALANCE_POLL_MS, min(heartbeat_interval_ms, 1000 * members // GROUP_READS_PER_S))


@dataclass(frozen=True)
class SubscriptionSpec:
    topics: tuple[str, ...] = ()
    pattern: str | None = None


def new_member_id(client_id: str = "") -> str:
    """Kafka-style member id: client id, where, and a random part (one per incarnation)."""
    prefix = f"{client_id}-" if client_id else ""
    return f"{prefix}{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def join_request(
    settings: GroupSettings,
    *,
    member_id: str,
    subscription: SubscriptionSpec,
    client_id: str,
    replaces: str | None,
    features: tuple[str, ...],
) -> JoinRequest:
    """A member's join request (what it owns is filled in when it joins)."""
    return JoinRequest(
        member_id=member_id,
        protocols=settings.protocol_names,
        topics=subscription.topics,
        pattern=subscription.pattern,
        instance_id=settings.instance_id,
        session_timeout_ms=settings.session_timeout_ms,
        rebalance_timeout_ms=settings.rebalance_timeout_ms,
        client_id=client_id,
        client_host=socket.gethostname(),
        replaces=replaces,
        features=features,
    )


def join_wait_ms(settings: GroupSettings, *, must_complete_join: bool) -> int:
    """How long a starting member waits for its first assignment: short (two heartbeats and
    2 s after the initial rebalance delay), or, when it must complete its join
    (Trigger.AvailableNow), ``rebalanceTimeoutMs`` + ``sessionTimeoutMs``: a member that
    stopped heartbeating must expire first."""
    if must_complete_join:
        return settings.rebalance_timeout_ms + settings.session_timeout_ms
    return 2 * settings.heartbeat_interval_ms + 2000 + settings.initial_rebalance_delay_ms


def has_assignment(holdings: Holdings) -> bool:
    """The join is complete: the rebalance settled, or the member holds partitions in a
    stable generation."""
    return holdings.settled or (holdings.stable and bool(holdings.held))


def wait_for_assignment(
    first: Holdings,
    poll: Callable[[], Holdings],
    *,
    clock: Clock,
    deadline_ms: int,
    poll_s: Callable[[], float],
    closing: threading.Event,
) -> tuple[Holdings, bool]:
    """Poll every ``poll_s()`` until the member has an assignment (:func:`has_assignment`) or
    ``deadline_ms`` (on ``clock``'s monotonic time) has passed. Returns the last holdings and
    whether ``closing`` was set meanwhile (the query stopped: the wait ends at once)."""
    holdings = first
    while not has_assignment(holdings) and clock.monotonic_ms() < deadline_ms:
        if pause(clock, poll_s(), until=closing):
            return holdings, True
        holdings = poll()
    return holdings, False


def pause(clock: Clock, seconds: float, *, until: threading.Event) -> bool:
    """Wait ``seconds`` on ``clock``, ending early once ``until`` is set (noticed within
    :data:`REBALANCE_POLL_MS`); whether it is set."""
    end = clock.monotonic_ms() + round(seconds * 1000)
    while not until.is_set():
        left_ms = end - clock.monotonic_ms()
        if left_ms <= 0:
            return False
        clock.sleep(min(left_ms, REBALANCE_POLL_MS) / 1000.0)
    return True
