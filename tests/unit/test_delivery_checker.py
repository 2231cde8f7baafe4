"""The delivery checker (tests/delivery.py) on small synthetic journals and group logs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spark_kafka_group.group import GroupRecord, MemberProfile, Subscription, TopicPartition
from spark_kafka_group.group.payloads import GenerationPayload, JoinPayload, SyncPayload
from spark_kafka_group.group.record_helpers import (
    commit_record,
    expire_record,
    generation_record,
    join_record,
    sync_record,
)
from tests.delivery import Batch, check_delivery, journal_batches

T = "t"


def join(member: str, ts: int, *, rebalance: bool) -> GroupRecord:
    payload = JoinPayload(
        profile=MemberProfile(
            session_timeout_ms=6000,
            rebalance_timeout_ms=10000,
            protocol_type="consumer",
            protocols=(("cooperative-sticky", None),),
            subscription=Subscription((T,)),
        ),
        rebalance=rebalance,
        owned=frozenset(),
    )
    return join_record(now_ms=ts, member_id=member, instance_id=None, generation=0, payload=payload)


def generation(gen: int, leader: str, ts: int, members: tuple[str, ...] = ()) -> GroupRecord:
    payload = GenerationPayload(
        leader=leader, protocol="cooperative-sticky", members=members or (leader,), deadline_ms=None
    )
    return generation_record(now_ms=ts, writer=leader, generation=gen, payload=payload)


def sync(gen: int, leader: str, ts: int, assignment: dict[str, list[int]]) -> GroupRecord:
    payload = SyncPayload(
        protocol="cooperative-sticky",
        assignment={m: frozenset(TopicPartition(T, p) for p in ps) for m, ps in assignment.items()},
        revoking={m: frozenset() for m in assignment},
        snapshot={T: 2},
    )
    return sync_record(now_ms=ts, leader=leader, generation=gen, payload=payload)


def commit(member: str, gen: int, ts: int, partition: int, offset: int) -> GroupRecord:
    return commit_record(
        now_ms=ts, member_id=member, instance_id=None, generation=gen,
        partition=TopicPartition(T, partition), offset=offset, metadata=None,
    )  # fmt: skip


def expire(member: str, gen: int, ts: int) -> GroupRecord:
    return expire_record(
        now_ms=ts, member_id=member, instance_id=None, generation=gen,
        reason="session_timeout", delay_until_ms=None,
    )  # fmt: skip


def handover_log(extra: Sequence[GroupRecord] = ()) -> list[GroupRecord]:
    """Member a owns partitions 0 and 1, commits 4 (t=2s), is expired (t=10s); b takes over."""
    return [
        join("a", 0, rebalance=True),
        generation(1, "a", 0),
        sync(1, "a", 0, {"a": [0, 1]}),
        commit("a", 1, 2000, 0, 4),
        commit("a", 1, 2000, 1, 4),
        expire("a", 1, 10_000),
        join("b", 10_000, rebalance=False),
        generation(2, "b", 10_000),
        sync(2, "b", 10_000, {"b": [0, 1]}),
        commit("b", 2, 12_000, 0, 10),
        commit("b", 2, 12_000, 1, 10),
        *extra,
    ]


def batch(member: str, pid: int, n: int, t: float, records: list[tuple[int, int]]) -> Batch:
    return Batch(member, pid, n, t, tuple(records))


def rng(p: int, a: int, b: int) -> list[tuple[int, int]]:
    return [(p, o) for o in range(a, b)]


def good_batches() -> list[Batch]:
    # a reads [0,4) (committed at t=2), then [4,7) which it never commits: b re-reads it.
    return [
        batch("a", 1, 0, 1.0, rng(0, 0, 4) + rng(1, 0, 4)),
        batch("a", 1, 1, 3.0, rng(0, 4, 7) + rng(1, 4, 7)),
        batch("b", 2, 0, 11.0, rng(0, 4, 10) + rng(1, 4, 10)),
    ]


PRODUCED = {0: 10, 1: 10}


def test_a_clean_handover_passes_and_counts_the_tail_duplicates() -> None:
    result = check_delivery(PRODUCED, good_batches(), handover_log(), topic=T)
    result.assert_ok()
    assert result.produced == 20
    assert result.consumed == 26
    assert result.duplicated == 6
    assert result.duplicates_by == {("a/1", 0): 3, ("a/1", 1): 3}
    assert result.rebalances == 2
    assert result.max_pause_s == 8.0
    assert "lost=0 duplicated=6" in result.summary()
    assert "double_owned=0" in result.summary()


def test_a_gap_inside_an_incarnation_is_caught() -> None:
    batches = good_batches()
    batches[2] = batch("b", 2, 0, 11.0, rng(0, 4, 6) + rng(0, 7, 10) + rng(1, 4, 10))
    result = check_delivery(PRODUCED, batches, handover_log(), topic=T)
    assert not result.ok
    assert any("offsets 5 -> 7 inside one batch" in g for g in result.gaps), result.gaps
    # a gap between two batches of one incarnation that nobody else filled
    batches = good_batches()
    batches[0] = batch("a", 1, 0, 1.0, rng(0, 0, 2) + rng(1, 0, 4))
    batches.insert(1, batch("a", 1, 1, 2.0, rng(0, 3, 4)))
    result = check_delivery(PRODUCED, batches, handover_log(), topic=T)
    assert any("jumped from 1 to 3" in g for g in result.gaps), result.gaps
    assert result.lost == [(0, 2)]


def test_a_loss_is_caught() -> None:
    batches = good_batches()
    batches[2] = batch("b", 2, 0, 11.0, rng(0, 4, 9) + rng(1, 4, 10))
    result = check_delivery(PRODUCED, batches, handover_log(), topic=T)
    assert result.lost == [(0, 9)]
    assert "lost=1" in result.summary()
    assert not result.ok


def test_an_illegal_duplicate_is_caught() -> None:
    # b starts at 0 instead of a's committed 4: records a committed are read again
    batches = good_batches()
    batches[2] = batch("b", 2, 0, 11.0, rng(0, 0, 10) + rng(1, 4, 10))
    result = check_delivery(PRODUCED, batches, handover_log(), topic=T)
    assert result.duplicated == 10
    assert len(result.illegal_duplicates) == 4  # offsets 0..3: not a's uncommitted tail
    assert "partition 0 offset 0 read 2 times" in result.illegal_duplicates[0]
    # one incarnation reading a range twice is never legal
    batches = good_batches()
    batches.insert(2, batch("a", 1, 2, 4.0, rng(0, 5, 7)))
    result = check_delivery(PRODUCED, batches, handover_log(), topic=T)
    assert any("again after reaching 6" in d for d in result.illegal_duplicates)


def test_a_paused_members_in_flight_batch_journaled_after_the_new_owner_is_its_tail() -> None:
    # a planned [4, 7) before it was paused and finished it only after b, which started at
    # a's commit (4), had read beyond it: a's last batch is still its uncommitted tail.
    batches = good_batches()
    batches[1] = batch("a", 1, 1, 12.0, rng(0, 4, 7) + rng(1, 4, 7))
    result = check_delivery(PRODUCED, batches, handover_log(), topic=T)
    result.assert_ok()
    assert result.duplicated == 6
    # ... but only that: b starting before a's commit (4) is still caught, beyond a's tail
    # and inside it
    batches = [
        batch("a", 1, 0, 1.0, rng(0, 0, 2) + rng(1, 0, 2)),
        batch("a", 1, 1, 1.5, rng(0, 2, 3) + rng(1, 2, 3)),
        batch("a", 1, 2, 1.8, rng(0, 3, 4) + rng(1, 3, 4)),
        batch("a", 1, 3, 12.0, rng(0, 4, 7) + rng(1, 4, 7)),
        batch("b", 2, 0, 11.0, rng(0, 2, 10) + rng(1, 4, 10)),
    ]
    result = check_delivery(PRODUCED, batches, handover_log(), topic=T)
    assert [d.split(": ", 1)[1] for d in result.illegal_duplicates] == [
        "not in the uncommitted tail of a moved partition's previous owner",  # offset 2
        "b/2 read it at 11.000 when 4 was already committed",  # offset 3
    ], result.illegal_duplicates


def test_commit_ahead_of_consumption_and_zombie_commits_are_caught() -> None:
    log = handover_log()
    log[3] = commit("a", 1, 2000, 0, 9)  # a committed 9 at t=2 s; it had read up to 3
    result = check_delivery(PRODUCED, good_batches(), log, topic=T)
    assert len(result.commits_ahead) == 1, result.commits_ahead
    assert "committed 9 but only 4 had been consumed" in result.commits_ahead[0]

    late = commit("a", 1, 13_000, 0, 7)  # a commits after its EXPIRE
    result = check_delivery(PRODUCED, good_batches(), handover_log([late]), topic=T)
    assert len(result.zombie_commits) == 1
    assert "after its EXPIRE" in result.zombie_commits[0]


def test_double_ownership_is_caught() -> None:
    log = [
        join("a", 0, rebalance=True),
        join("b", 0, rebalance=False),
        generation(1, "a", 0, members=("a", "b")),
        sync(1, "a", 0, {"a": [0, 1], "b": [1]}),
    ]
    result = check_delivery(PRODUCED, good_batches()[:1], log, topic=T)
    assert result.double_owned, result.details()
    assert "given to" in result.double_owned[0]
    assert "double_owned=" in result.summary() and not result.ok


def test_journal_lines_of_member_processes() -> None:
    lines: list[dict[str, Any]] = [
        {"batch": 0, "pid": 7, "instance": None, "time": 1.5, "records": [[0, 0], [0, 1]]},
        {"batch": 1, "pid": 7, "instance": None, "time": 2.5, "records": []},
    ]
    batches = journal_batches("m1", lines)
    assert batches[0] == Batch("m1", 7, 0, 1.5, ((0, 0), (0, 1)))
    result = check_delivery({0: 2}, batches, [], print_summary=False)
    result.assert_ok()
    assert result.incarnations == 1


def test_a_member_that_lost_its_partition_may_reread_its_uncommitted_batch() -> None:
    # b (expired and rejoined in the same process) restarts at the last commit, 10
    batches = [
        *good_batches(),
        batch("b", 2, 1, 13.0, rng(0, 10, 12)),
        batch("b", 2, 2, 14.0, rng(0, 10, 14)),
    ]
    result = check_delivery({0: 14, 1: 10}, batches, handover_log(), topic=T)
    result.assert_ok()
    assert result.duplicates_by[("b/2", 0)] == 2
    # restarting anywhere but at the last commit is not
    batches[-1] = batch("b", 2, 2, 14.0, rng(0, 11, 14))
    result = check_delivery({0: 14, 1: 10}, batches, handover_log(), topic=T)
    assert any("again after reaching 11" in d for d in result.illegal_duplicates)
