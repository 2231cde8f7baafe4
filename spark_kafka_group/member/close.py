"""Closing: how long a leaving member waits for the commit of the last batch it handed to
Spark (on the injected clock)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from spark_kafka_group.group import TopicPartition
from spark_kafka_group.group.timer import Clock
from spark_kafka_group.member.error_text import names
from spark_kafka_group.member.join import REBALANCE_POLL_MS

log = logging.getLogger(__name__)

#: When a dynamic member closes with a batch whose commit has not reached the log yet, how long
#: it waits for that commit (the progress listener writes it once the batch completes) before
#: it leaves anyway: a commit written after the LEAVE would be refused, and the new owner would
#: read that batch again. The listener's commit (a Python callback from the JVM, then its
#: commit object, which the member takes in) was seen to take more than 2 s on a busy 2-core
#: machine.
LEAVE_GRACE_S = 5.0


def await_final_commit(
    uncommitted: Callable[[], Collection[TopicPartition] | None],
    *,
    clock: Clock,
    grace_s: float,
    group_id: str,
) -> bool:
    """Wait up to ``grace_s`` (on ``clock``) until ``uncommitted()``, the partitions of batches
    handed to Spark without a commit of their end, is empty; checked every
    :data:`REBALANCE_POLL_MS`. False when ``uncommitted()`` says the member is no longer in the
    group (None: left, expired or replaced meanwhile); True when it may leave now."""
    deadline = clock.monotonic_ms() + round(grace_s * 1000)
    while True:
        waiting = uncommitted()
        if waiting is None:
            return False
        left_ms = deadline - clock.monotonic_ms()
        if not waiting or left_ms <= 0:
            if waiting:
                log.info(
                    "group %s: leaving without a commit of %s: the last batch did not "
                    "complete (its new owner reads it from the last commit)",
                    group_id, names(waiting),
                )  # fmt: skip
            return True
        clock.sleep(min(left_ms, REBALANCE_POLL_MS) / 1000.0)
