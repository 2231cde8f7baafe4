"""Closing: how long a closing member waits for the commit of the last batch it handed to
Spark (on the injected clock), and whether it may leave then.

A dynamic member leaves (LEAVE) only once every batch it handed to Spark is committed. A batch
still without its commit when the grace period ends was interrupted by the stop, possibly after
its sink ran: Spark's checkpoint holds its offsets but not its completion, so a restart on that
checkpoint runs it again with the same offsets (and a sink idempotent by batch id skips it). A
LEAVE would give its partitions to another member, which would read it again from the last
commit. So such a member stays in the group, as a crashed one does: a restart on the same
checkpoint replaces it at once, otherwise its session timeout expires it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from enum import Enum

from spark_kafka_group.group import TopicPartition
from spark_kafka_group.group.timer import Clock
from spark_kafka_group.member.error_text import names
from spark_kafka_group.member.join import REBALANCE_POLL_MS
from spark_kafka_group.options import GroupSettings

log = logging.getLogger(__name__)

#: When a dynamic member closes with a batch whose commit has not reached the log yet, how long
#: it waits for that commit (the progress listener writes it once the batch completes) before
#: it gives up and stays in the group without a LEAVE. The listener's commit (a Python callback
#: from the JVM, then its commit object, which the member takes in) was seen to take more than
#: 2 s on a busy 2-core machine.
LEAVE_GRACE_S = 5.0


class Closing(Enum):
    """What a closing member does."""

    #: Every batch it handed to Spark is committed: it leaves, the group rebalances at once.
    LEAVE = "leave"
    #: A batch it handed to Spark has no commit (or it is static): no LEAVE; its partitions wait
    #: for its restart until its session timeout.
    STAY = "stay"
    #: It is no longer in the group (left, expired or replaced meanwhile): nothing to write.
    GONE = "gone"


def closing(uncommitted: Collection[TopicPartition] | None, *, static: bool) -> Closing:
    """What a member closes with: ``uncommitted`` are the partitions of batches handed to
    Spark without a commit of their end (None: no longer in the group)."""
    if uncommitted is None:
        return Closing.GONE
    if static or uncommitted:
        return Closing.STAY
    return Closing.LEAVE


def await_final_commit(
    uncommitted: Callable[[], Collection[TopicPartition] | None],
    *,
    clock: Clock,
    grace_s: float,
    settings: GroupSettings,
    member_id: str,
) -> frozenset[TopicPartition] | None:
    """Wait up to ``grace_s`` (on ``clock``) until ``uncommitted()``, the partitions of batches
    a dynamic member handed to Spark without a commit of their end, is empty; checked every
    :data:`REBALANCE_POLL_MS`. Returns what is still uncommitted then (empty: it may leave;
    otherwise it stays, and says so in a log line), or None as soon as ``uncommitted()`` says
    the member is no longer in the group."""
    deadline = clock.monotonic_ms() + round(grace_s * 1000)
    while True:
        waiting = uncommitted()
        if waiting is None:
            return None
        left_ms = deadline - clock.monotonic_ms()
        if not waiting or left_ms <= 0:
            if waiting:
                _log_stay(settings, member_id, waiting)
            return frozenset(waiting)
        clock.sleep(min(left_ms, REBALANCE_POLL_MS) / 1000.0)


def _log_stay(settings: GroupSettings, member_id: str, waiting: Collection[TopicPartition]) -> None:
    log.info(
        "group %s: member %s closes without leaving the group: its last batch (%s) did not "
        "complete. A restart on the same checkpoint replaces it at once and runs that batch "
        "again; otherwise it expires after sessionTimeoutMs = %d and the new owners read that "
        "batch from the last commit",
        settings.group_id, member_id, names(waiting), settings.session_timeout_ms,
    )  # fmt: skip
