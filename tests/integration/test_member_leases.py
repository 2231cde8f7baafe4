"""Liveness outside the log: members on a real Delta group log stay alive on their leases
alone, and every reader of the log (the CLI's describe and reset) sees them so."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from spark_kafka_group.admin import GroupNotEmptyError, describe_group, reset_offsets
from spark_kafka_group.group.assignors import load_assignor
from spark_kafka_group.member.member import GroupMember, SubscriptionSpec
from spark_kafka_group.options import GroupSettings
from spark_kafka_group.store import group_log_uri
from spark_kafka_group.store.leases import LEASE_DIR, LeaseFiles
from tests.streaming import group_records

SESSION_MS = 6_000


def member(store: str) -> GroupMember:
    return GroupMember(
        GroupSettings(
            group_id="g",
            store=store,
            storage_options={},
            heartbeat_interval_ms=500,
            session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=10_000,
            assignment_strategy=(load_assignor("cooperative-sticky"),),
            instance_id=None,
            scheduled_rebalance_max_delay_ms=0,
            rebalance_listener=None,
            initial_rebalance_delay_ms=0,
        ),
        subscription=SubscriptionSpec(topics=("t",)),
        topic_counts=lambda: {"t": 4},
    )


def test_members_stay_alive_on_leases_and_the_cli_sees_them(tmp_path: Path) -> None:
    store = str(tmp_path / "groups")
    a, b = member(store), member(store)
    try:
        a.start()
        b.start()
        deadline = time.monotonic() + 20
        while not (a.poll().settled and b.poll().settled) and time.monotonic() < deadline:
            time.sleep(0.2)
        settled_at = len(group_records(store, "g"))
        time.sleep(SESSION_MS / 1000 + 2)  # longer than a session: nothing written, no expiry
        records = group_records(store, "g")[settled_at:]
        assert [r.kind for r in records if r.kind in ("HEARTBEAT", "EXPIRE")] == []
        info = describe_group(store, "g")
        now = time.time() * 1000
        assert {m.member_id for m in info.members} == {a.member_id, b.member_id}
        assert all(now - m.last_seen_ms < SESSION_MS for m in info.members)
        with pytest.raises(GroupNotEmptyError, match="has live members"):
            reset_offsets(store, "g", {("t", 0): 0}, execute=True)
        assert not any(r.kind == "EXPIRE" for r in group_records(store, "g"))
        renewed = LeaseFiles(group_log_uri(store, "g")).read()
        assert set(renewed) == {a.member_id, b.member_id}
    finally:
        a.close()
    # A member that leaves takes its lease with it; the other keeps renewing its own.
    leases = LeaseFiles(group_log_uri(store, "g")).read()
    assert a.member_id not in leases and b.member_id in leases
    assert (tmp_path / "groups" / "g" / LEASE_DIR).is_dir()
    b.close()
