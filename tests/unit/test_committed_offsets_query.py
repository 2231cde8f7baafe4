"""The one-query read of a group's committed offsets (``docs/offsets.md``), run locally with
delta-rs over a real group log written by a real member whose commits go through its commit
object and the leader's fold."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from spark_kafka_group.group import TopicPartition
from spark_kafka_group.member.member import GroupMember, SubscriptionSpec
from spark_kafka_group.ops.admin import describe_group, reset_offsets
from spark_kafka_group.ops.committed import committed_offsets_table
from spark_kafka_group.ops.delete_offsets import delete_offsets
from spark_kafka_group.store import group_log_uri
from spark_kafka_group.testing.simulation import member_settings


def _rows(store: str, group: str) -> dict[TopicPartition, tuple[int, str | None]]:
    table = committed_offsets_table(group_log_uri(store, group)).to_pylist()
    return {
        TopicPartition(r["topic"], r["partition"]): (r["offset"], r["member_id"]) for r in table
    }


def test_the_query_gives_the_newest_commit_of_each_partition(tmp_path: Path) -> None:
    store = str(tmp_path)
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    reset_offsets(store, "g", {t0: 5, t1: 7}, execute=True)
    reset_offsets(store, "g", {t0: 6}, execute=True)
    assert _rows(store, "g") == {t0: (6, None), t1: (7, None)}

    settings = replace(
        member_settings(heartbeat_interval_ms=500, initial_rebalance_delay_ms=0), store=store
    )
    member = GroupMember(
        settings, subscription=SubscriptionSpec(topics=("t",)), topic_counts=lambda: {"t": 2}
    )
    try:
        assignment = member.start()
        assert assignment.held == {t0, t1}
        ends = {t0: 10, t1: 20}
        member.begin_batch(ends, batch_generation=assignment.generation)
        member.commit(ends, batch_generation=assignment.generation, batch_member=member.member_id)
        deadline = time.monotonic() + 20
        while _rows(store, "g").get(t1, (None,))[0] != 20 and time.monotonic() < deadline:
            time.sleep(0.1)  # the leader (this member) folds its commit object within a second
        assert _rows(store, "g") == {t0: (10, member.member_id), t1: (20, member.member_id)}
        described = describe_group(store, "g").committed
        assert described == ends
    finally:
        member.close()


def test_the_query_leaves_out_partitions_whose_offsets_were_deleted(tmp_path: Path) -> None:
    """An OFFSET_DELETE row hides the partition's older COMMIT rows; a newer COMMIT shows it
    again (``kafka-group delete-offsets``, then a reset)."""
    store = str(tmp_path)
    t0, u0, u1 = TopicPartition("t", 0), TopicPartition("u", 0), TopicPartition("u", 1)
    reset_offsets(store, "g", {t0: 5, u0: 7, u1: 8}, execute=True)
    deletion = delete_offsets(store, "g", [u0, u1, TopicPartition("u", 2)])
    assert deletion.deleted == {u0, u1} and not deletion.failed
    assert _rows(store, "g") == {t0: (5, None)}
    assert describe_group(store, "g").committed == {t0: 5}
    reset_offsets(store, "g", {u1: 3}, execute=True)
    assert _rows(store, "g") == {t0: (5, None), u1: (3, None)}
