"""Liveness outside the log: members on a real Delta group log stay alive on their leases
alone, and every reader of the log (the CLI's describe and reset) sees them so."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.member import GroupMember
from spark_kafka_group.ops.admin import GroupNotEmptyError, describe_group, reset_offsets
from spark_kafka_group.store import group_log_uri
from spark_kafka_group.store.leases import LEASE_DIR, LeaseFiles
from spark_kafka_group.testing.group_log import group_records
from tests.members import group_member

SESSION_MS = 6_000


def member(store: str) -> GroupMember:
    return group_member(
        store, "g", {"t": 4}, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=10_000
    )


def test_members_stay_alive_on_leases_and_the_cli_sees_them(tmp_path: Path) -> None:
    store = str(tmp_path / "groups")
    a, b = member(store), member(store)
    try:
        a.start()
        b.start()
        deadline = time.monotonic() + 20
        while (
            not (a.current_holdings().settled and b.current_holdings().settled)
            and time.monotonic() < deadline
        ):
            time.sleep(0.2)
        assert a.current_holdings().settled and b.current_holdings().settled, (
            f"not settled in 20 s: {a.current_holdings()}, {b.current_holdings()}"
        )
        settled_at = len(group_records(store, "g"))
        time.sleep(SESSION_MS / 1000 + 2)  # longer than a session: nothing written, no expiry
        records = group_records(store, "g")[settled_at:]
        assert [
            r.kind for r in records if r.kind in (RecordKind.HEARTBEAT, RecordKind.EXPIRE)
        ] == []
        info = describe_group(store, "g")
        now = time.time() * 1000
        assert {m.member_id for m in info.members} == {a.member_id, b.member_id}
        assert all(now - m.last_seen_ms < SESSION_MS for m in info.members)
        with pytest.raises(GroupNotEmptyError, match="has live members"):
            reset_offsets(store, "g", {TopicPartition("t", 0): 0}, execute=True)
        assert not any(r.kind == RecordKind.EXPIRE for r in group_records(store, "g"))
        renewed = LeaseFiles(group_log_uri(store, "g")).read()
        assert set(renewed) == {a.member_id, b.member_id}
    finally:
        a.close()
    # A member that leaves takes its lease with it; the other keeps renewing its own.
    leases = LeaseFiles(group_log_uri(store, "g")).read()
    assert a.member_id not in leases and b.member_id in leases
    assert (tmp_path / "groups" / "g" / LEASE_DIR).is_dir()
    b.close()


def test_reset_offsets_expires_stopped_members_only_after_watching_them(tmp_path: Path) -> None:
    """A member that looks stopped by its machine's timestamps (a minute old, twice its
    session timeout) is expired only after reset-offsets watched it silent for its session
    timeout on its own clock; one whose lease keeps changing is live, whatever its clock."""
    from spark_kafka_group.member.log_client import GroupLogClient
    from tests.integration.cli_support import GroupDriver

    store = str(tmp_path / "groups")
    stopped = GroupDriver(store, "stopped", {"t": 2}, session_timeout_ms=SESSION_MS)
    stopped.rebalance(["A"])
    started = time.monotonic()
    reset_offsets(store, "stopped", {TopicPartition("t", 0): 0}, execute=True)
    assert time.monotonic() - started >= SESSION_MS / 1000
    kinds = [r.kind for r in group_records(store, "stopped")]
    assert kinds[-2:] == [RecordKind.EXPIRE, RecordKind.COMMIT] or kinds[-3:-1] == [
        RecordKind.EXPIRE,
        RecordKind.GENERATION,
    ], kinds
    assert GroupLogClient(store, "stopped").fold().group.offsets[TopicPartition("t", 0)].offset == 0

    behind = GroupDriver(store, "behind", {"t": 2}, session_timeout_ms=SESSION_MS)
    behind.rebalance(["B"])  # its records say a minute ago: a machine whose clock is behind
    leases = LeaseFiles(group_log_uri(store, "behind"))
    renewing = True

    def renew() -> None:
        number = 0
        while renewing:
            number += 1
            leases.renew("B", number)
            time.sleep(0.5)

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        with pytest.raises(GroupNotEmptyError, match="has live members"):
            reset_offsets(store, "behind", {TopicPartition("t", 0): 0}, execute=True)
    finally:
        renewing = False
        renewer.join()
    assert not any(r.kind == RecordKind.EXPIRE for r in group_records(store, "behind"))
