"""Commits through commit objects, member by member: production members over the in-memory log,
leases and commit objects, stepped by hand on an injected clock.

What must stay ordered: a partition being revoked is released only with its owner's last
commit in the log (the new owner starts exactly there); a member leaving, expired or replaced
has its recorded commits folded first; a stale object (a partition that moved, a member that
is gone) is never applied; the fold never moves a committed offset back.
"""

from __future__ import annotations

from collections.abc import Iterable

from spark_kafka_group.group import GroupRecord, ManualClock, TopicPartition
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.offsets import fold_commit_objects
from spark_kafka_group.group.types import CommitObject, RecordedOffset
from spark_kafka_group.listener.writes import commit_batch_for_member
from spark_kafka_group.member.folder import COMMIT_FOLD_INTERVAL_MS, FOLD_FALLBACK_INTERVALS
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.store.commit_objects import InMemoryCommitObjects
from spark_kafka_group.store.memory import InMemoryLeases, InMemoryLog
from spark_kafka_group.testing.simulation import SimMember, converged

META = {"t": 4}


class Group:
    def __init__(self) -> None:
        self.clock = ManualClock(1_000)
        self.log = InMemoryLog()
        self.leases = InMemoryLeases()
        self.objects = InMemoryCommitObjects()
        self.members: list[SimMember] = []

    def add(
        self, name: str, *, instance_id: str | None = None, replaces: str | None = None
    ) -> SimMember:
        m = SimMember(
            name, self.log, self.clock, lambda: META, leases=self.leases,
            commit_objects=self.objects, session_timeout_ms=10_000,
            heartbeat_interval_ms=1_000, instance_id=instance_id, replaces=replaces,
        )  # fmt: skip
        self.members.append(m)
        return m

    def step(self, members: Iterable[SimMember] | None = None, *, ms: int = 200) -> None:
        for m in list(members if members is not None else self.members):
            m.step()
        self.clock.advance(ms)

    def settle(self, limit: int = 200) -> None:
        for _ in range(limit):
            self.step()
            if converged(self.members[0].coord, META) and set(
                self.members[0].coord.group.members
            ) == {m.member_id for m in self.members}:
                return
        raise AssertionError("the group did not settle")

    def until_revoking(self, m: SimMember) -> frozenset[TopicPartition]:
        """Step (10 ms at a time) until ``m`` is giving partitions up; those partitions."""
        for _ in range(100):
            self.step(ms=10)
            if m.member.holdings.revoking:
                return m.member.holdings.revoking
        raise AssertionError(f"{m.member_id} gives nothing up")

    def committed(self) -> dict[TopicPartition, int]:
        fresh = SimMember("reader", self.log, self.clock, lambda: META)
        fresh.fold()
        return {tp: o.offset for tp, o in fresh.coord.group.offsets.items()}

    def records(self, kind: str) -> list[GroupRecord]:
        return [r for r in self.log.records if r.kind == kind]


def commit(m: SimMember, offsets: dict[TopicPartition, int], *, release: bool = True) -> None:
    """A batch reads ``offsets``' partitions up to there and completes; the reader commits."""
    a = m.member.holdings
    m.member.begin_batch(offsets, batch_generation=a.generation)
    m.member.commit(
        offsets,
        batch_generation=a.generation,
        batch_member=m.member_id,
        release=a.revoking if release else (),
    )


def test_a_commit_is_recorded_at_once_and_folded_by_the_leader_in_one_append() -> None:
    g = Group()
    a, b = g.add("a"), g.add("b")
    g.settle()
    appends = g.log.appends
    for m in (a, b):
        commit(m, {tp: 10 for tp in m.member.holdings.held})
    assert g.log.appends == appends  # commit() wrote nothing to the log
    g.step([a, b], ms=COMMIT_FOLD_INTERVAL_MS)  # each writes its object; the leader folds
    g.step([a, b], ms=COMMIT_FOLD_INTERVAL_MS)
    assert g.committed() == {TopicPartition("t", p): 10 for p in range(4)}
    assert g.log.appends - appends == 1  # both members' commits: one append
    assert {r.member_id for r in g.records(RecordKind.COMMIT)} == {"a", "b"}


def test_a_revoked_partition_is_released_with_its_last_commit_in_the_log() -> None:
    """Its last batch's commit was only recorded (in the object, not yet folded) when the
    revocation began: the release writes that offset first, so the new owner starts there."""
    g = Group()
    a = g.add("a")
    g.settle()
    g.clock.advance(COMMIT_FOLD_INTERVAL_MS)
    g.step(ms=10)  # the leader has just folded: the next fold is an interval away
    commit(a, {TopicPartition("t", p): 7 for p in range(4)})
    g.add("b")
    revoking = g.until_revoking(a)
    assert all(g.committed().get(tp) != 7 for tp in revoking)  # not folded yet
    # The next batch does not read them; its commit releases them (as the reader does).
    commit(a, {tp: 8 for tp in a.member.holdings.held - revoking})
    a.step()  # the background step commit() woke: it writes the release
    [revoke] = [r for r in g.records(RecordKind.REVOKE) if r.member_id == "a"]
    assert g.committed() == {**{tp: 7 for tp in revoking}, **g.committed()}
    before = g.log.records[: g.log.records.index(revoke)]
    landed = {TopicPartition(r.topic or "", r.partition or 0): r.offset for r in before
              if r.kind == RecordKind.COMMIT}  # fmt: skip
    assert all(landed.get(tp) == 7 for tp in revoking), landed
    g.settle()


def test_a_crashed_members_recorded_commits_land_before_its_expiry() -> None:
    """The crashed member led the group (so nobody else folds objects): whoever expires it
    folds its object in the same append, before the EXPIRE."""
    g = Group()
    b, a = g.add("b"), g.add("a")
    g.settle()
    assert a.coord.group.leader == "b"
    g.clock.advance(COMMIT_FOLD_INTERVAL_MS)
    g.step(ms=10)  # b has just folded: the next fold is an interval away
    theirs = {tp: 42 for tp in b.member.holdings.held}
    commit(b, theirs)
    g.step([b], ms=0)  # b writes its object, then crashes before it folds it
    assert all(g.committed().get(tp) != 42 for tp in theirs)
    g.members.remove(b)
    for _ in range(200):
        g.step([a], ms=500)
        if "b" not in a.coord.group.members:
            break
    assert "b" not in a.coord.group.members
    [expire] = g.records(RecordKind.EXPIRE)
    landed = {
        TopicPartition(r.topic or "", r.partition or 0): r.offset
        for r in g.log.records[: g.log.records.index(expire)]
        if r.kind == RecordKind.COMMIT and r.member_id == "b"
    }
    assert landed == theirs
    assert g.objects.list() == {}  # its object is gone with it


def test_a_member_leaving_commits_what_it_recorded_first() -> None:
    g = Group()
    _, b = g.add("a"), g.add("b")
    g.settle()
    theirs = {tp: 5 for tp in b.member.holdings.held}
    commit(b, theirs)
    b.member.loop.leave()
    [leave] = g.records(RecordKind.LEAVE)
    landed = {
        TopicPartition(r.topic or "", r.partition or 0): r.offset
        for r in g.log.records[: g.log.records.index(leave)]
        if r.kind == RecordKind.COMMIT and r.member_id == "b"
    }
    assert landed == theirs
    assert "b" not in g.objects.list()


def test_a_member_leaving_never_moves_back_what_the_progress_listener_committed() -> None:
    """Its last batch completed and the query stopped: Spark never calls the source's
    ``commit()`` for it, and the progress listener committed it in the member's name (in its
    own commit object, which the member takes in before its LEAVE). The member's older
    recorded commit (batch before, not folded yet) must not be written over it at the LEAVE:
    the next owner would read the last batch again."""
    g = Group()
    _, b = g.add("a"), g.add("b")
    g.settle()
    held = b.member.holdings.held
    commit(b, {tp: 5 for tp in held})  # recorded only: the fold is an interval away
    last = {tp: 9 for tp in held}
    b.member.begin_batch(last, batch_generation=b.member.holdings.generation)
    listener = GroupLogClient(
        "memory", b.member.settings.group_id, log=g.log, clock=g.clock, commit_objects=g.objects
    )
    written = commit_batch_for_member(
        "memory", b.member.settings.group_id, b.member_id,
        b.member.holdings.generation, last, batch_id=1, client=listener,
    )  # fmt: skip
    assert "b~listener" in g.objects.list()  # the listener's own commit object, no append
    assert written == len(held)
    b.member.close(grace_s=0.0)
    [leave] = g.records(RecordKind.LEAVE)
    commits = [
        (TopicPartition(r.topic or "", r.partition or 0), r.offset)
        for r in g.log.records[: g.log.records.index(leave)]
        if r.kind == RecordKind.COMMIT and r.member_id == "b"
    ]
    assert dict(commits) == last, commits  # the newest commit of each partition
    assert g.committed() == {**g.committed(), **last}


def test_a_replaced_incarnations_recorded_commits_are_folded_before_it_is_fenced() -> None:
    g = Group()
    _, b = g.add("a"), g.add("b")
    g.settle()
    theirs = {tp: 9 for tp in b.member.holdings.held}
    commit(b, theirs)
    g.step([b], ms=0)  # the object is written; the process dies before the fold
    g.members.remove(b)
    b2 = g.add("b2", replaces="b")
    b2.member.refresh_metadata()
    b2.member.poll()  # the reader's first step joins (no commit objects of its own written)
    [join] = [r for r in g.records(RecordKind.JOIN) if r.member_id == "b2"]
    landed = {
        TopicPartition(r.topic or "", r.partition or 0): r.offset
        for r in g.log.records[: g.log.records.index(join)]
        if r.kind == RecordKind.COMMIT and r.member_id == "b"
    }
    assert landed == theirs


def test_stale_objects_are_never_applied() -> None:
    """An object of a member that is gone, or with offsets of a partition that moved away and
    back since they were recorded, changes nothing; the fold never moves an offset back."""
    g = Group()
    a, _ = g.add("a"), g.add("b")
    g.settle()
    work = a.coord.fork()
    now = g.clock.now_ms()
    gone = CommitObject("ghost", 1, {TopicPartition("t", 0): RecordedOffset(99, 0)})
    a_tp = sorted(a.member.holdings.held)[0]
    since = a.coord.group.members["a"].held_since[a_tp]
    stale = CommitObject("a", 1, {a_tp: RecordedOffset(99, since - 1)})
    records, done = fold_commit_objects(work.group, {"ghost": gone, "a": stale}, now)
    assert records == [] and done == {"ghost", "a"}
    fresh = CommitObject("a", 2, {a_tp: RecordedOffset(50, since)})
    records, _ = fold_commit_objects(work.group, {"a": fresh}, now)
    assert [r.offset for r in records] == [50]
    work.apply_all(records)
    older = CommitObject("a", 3, {a_tp: RecordedOffset(40, since)})
    records, _ = fold_commit_objects(work.group, {"a": older}, now)
    assert records == []


def test_a_member_folds_itself_when_the_leader_is_gone() -> None:
    """By its own clock: its commit not folded for a few intervals, it folds every object."""
    g = Group()
    a, b = g.add("a"), g.add("b")
    g.settle()
    leader = a if a.coord.group.leader == "a" else b
    other = b if leader is a else a
    theirs = {tp: 3 for tp in other.member.holdings.held}
    commit(other, theirs)
    start = g.clock.now_ms()
    while not all(g.committed().get(tp) == 3 for tp in theirs):
        g.step([other], ms=COMMIT_FOLD_INTERVAL_MS // 2)  # the leader never steps
        assert g.clock.now_ms() - start <= (FOLD_FALLBACK_INTERVALS + 2) * COMMIT_FOLD_INTERVAL_MS
    assert g.clock.now_ms() - start >= FOLD_FALLBACK_INTERVALS * COMMIT_FOLD_INTERVAL_MS


def test_every_durable_commit_is_reported_once_whoever_wrote_it() -> None:
    """What ``commitToKafka`` copies: a member's offsets once the log holds them, folded by the
    leader, written at a release or at its LEAVE."""
    g = Group()
    a, b = g.add("a"), g.add("b")
    g.settle()
    copied: list[dict[TopicPartition, int]] = []
    b.member.on_durable = copied.append
    theirs = {tp: 11 for tp in b.member.holdings.held}
    commit(b, theirs)
    assert copied == []  # recorded, not durable yet
    for _ in range(4):
        g.step([a, b], ms=COMMIT_FOLD_INTERVAL_MS)
    assert copied == [theirs]
    last = {tp: 12 for tp in theirs}
    commit(b, last)
    b.member.loop.leave()  # the LEAVE writes the last commit first
    assert copied == [theirs, last]


def test_a_reset_by_policy_reaches_the_log_at_once() -> None:
    """A batch that started below the committed offset (``failOnDataLoss=false`` after a topic
    was recreated) commits a lower offset. The fold only moves offsets forward, so the commit
    is written directly: a successor must not start at the old, higher offset."""
    g = Group()
    a = g.add("a")
    g.settle()
    held = a.member.holdings.held
    commit(a, {tp: 10 for tp in held})
    g.step([a], ms=COMMIT_FOLD_INTERVAL_MS)
    g.step([a], ms=COMMIT_FOLD_INTERVAL_MS)
    assert g.committed() == {tp: 10 for tp in held}
    commit(a, {tp: 3 for tp in held})  # the recreated topic, read from its start
    a.step()  # the step commit() woke writes it directly, without waiting for a fold
    assert g.committed() == {tp: 3 for tp in held}
    g.step([a], ms=COMMIT_FOLD_INTERVAL_MS)
    g.step([a], ms=COMMIT_FOLD_INTERVAL_MS)
    assert g.committed() == {tp: 3 for tp in held}  # no fold moves it back up
