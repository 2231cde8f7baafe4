"""Exactly once into Delta across the group, end to end, two members writing one table through
``ExactlyOnceDeltaWriter``: one (a separate process) is killed at each point of a batch's life
(tests/kill_points.py), each point twice: restarted at once, and kept down until its partitions
moved; or it is paused with a batch in hand until its partitions moved and resumed (a zombie).
The other member reads what moved from the group's committed offset. The table holds every
produced (partition, offset) once."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from spark_kafka_group.testing.waiting import wait_until
from tests import kill_points
from tests.delta_kills import (
    PARTITIONS,
    assert_each_record_once,
    stop_producing_and_wait_for_the_table,
    two_members,
    writer_kill_chain,
)
from tests.groups import stable_with

pytestmark = [pytest.mark.spark, pytest.mark.broker]


# Eight Spark applications started one after the other, 35 to 55 s each from start to kill on
# two loaded cores: past pytest's 600 s default.
@pytest.mark.long
@pytest.mark.timeout(900)
def test_a_member_killed_at_each_point_of_a_batch_leaves_no_duplicate(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    """Each kill point both ways, the victim restarting at once and its partitions moving
    (kill_points.BOTH_WAYS; :func:`tests.delta_kills.writer_kill_chain`)."""
    writer_kill_chain(spark, bootstrap_servers, topic_name, group_store, tmp_path,
                      kill_points.BOTH_WAYS)  # fmt: skip


def test_a_zombie_resumed_mid_batch_after_its_partitions_moved_fails_and_writes_nothing(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    """The victim stops itself (SIGSTOP) holding its third batch, past its session timeout; the
    survivor takes its partitions and writes them; resumed, the victim's write of the batch it
    held fails with PartitionMovedError and its query fails: nothing of it lands twice."""
    uri = str(tmp_path / "events-table")
    with two_members(
        spark, bootstrap_servers, topic_name, group_store, tmp_path, "g-delta-zombie",
        extra=["--delta-table", uri, "--pause-before-delta-batch", "3"],
    ) as (victim, survivor, producer):  # fmt: skip
        wait_until(lambda: "pausing before" in victim.output(), 120, "the victim's pause")
        wait_until(
            lambda: stable_with(group_store, "g-delta-zombie", 1, PARTITIONS),
            60,
            "the victim's expiry",
        )
        # The survivor has written the victim's partitions (every partition, since the move):
        # a zombie resumed before that lands its batch first, with no conflict, and the new
        # owner's commit is the one that finds those offsets landed.
        at_move = survivor.batches_written()
        wait_until(
            lambda: survivor.partitions_written_since(at_move) == set(range(PARTITIONS)),
            60,
            "the new owner's writes of every partition",
        )
        victim.signal(signal.SIGCONT)
        returncode = victim.wait_for_exit("the zombie's query to end").returncode
        final = stop_producing_and_wait_for_the_table(producer, uri)
    assert returncode == 1, victim.output()[-3000:]
    assert "PartitionMovedError" in victim.output(), victim.output()[-3000:]
    assert_each_record_once(uri, final)
