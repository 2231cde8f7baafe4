"""One thread at a time owns a member's state and steps it: the thread in ``start()`` (the
join), then the heartbeat thread, then the thread that closes it. Other threads send commands
and read what the step publishes; the holdings book's lock is the only lock of ``member/``
and ``source/``. These tests hand the member from one owner to the next while a step is
stopped inside a read of the store."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

import spark_kafka_group
from spark_kafka_group.group import TopicPartition
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.timer import ManualClock
from spark_kafka_group.member.member import GroupMember
from spark_kafka_group.store.commit_objects import InMemoryCommitObjects
from spark_kafka_group.store.memory import InMemoryLeases
from tests.unit.test_trigger_never_waits import BLOCKED_S, GatedLog, member, settle

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
LOCKS = re.compile(r"threading\.(Lock|RLock|Condition|Semaphore|BoundedSemaphore|Barrier)\(")


def _member(log: GatedLog, clock: ManualClock, name: str = "a") -> GroupMember:
    return member(name, log, clock, InMemoryCommitObjects(), InMemoryLeases())


def _kinds(log: GatedLog, member_id: str) -> list[str]:
    return [r.kind for r in log.records if r.member_id == member_id]


def _run(target: object) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


def test_member_and_source_create_one_lock_between_them() -> None:
    package = Path(spark_kafka_group.__file__).parent
    found = [
        f"{path.relative_to(package)}: {line.strip()}"
        for folder in ("member", "source")
        for path in sorted((package / folder).rglob("*.py"))
        for line in path.read_text().splitlines()
        if LOCKS.search(line)
    ]
    assert found == ["member/holdings.py: self._lock = threading.Lock()"]


def test_close_on_another_thread_steps_the_member_once_the_join_has_stopped() -> None:
    clock, log = ManualClock(), GatedLog()
    m = _member(log, clock)
    log.gate.clear()  # the join's first step stops inside its fold
    started: list[object] = []
    joining = _run(lambda: started.append(m.start()))
    assert log.waiting.wait(BLOCKED_S), "the join never reached the store"

    closing = _run(m.close)
    closing.join(0.5)
    # The join owns the member: close() waits for it instead of writing beside it.
    assert closing.is_alive()
    assert RecordKind.LEAVE not in _kinds(log, "a")

    log.gate.set()
    joining.join(BLOCKED_S)
    closing.join(BLOCKED_S)
    assert not joining.is_alive() and not closing.is_alive()
    assert started, "start() returned nothing"
    kinds = _kinds(log, "a")
    assert kinds[0] == RecordKind.JOIN
    assert kinds[-1] == RecordKind.LEAVE  # and nothing of this member after it
    assert kinds.count(RecordKind.LEAVE) == 1


def test_two_threads_closing_at_once_write_one_leave_and_both_return_after_it() -> None:
    clock, log = ManualClock(), GatedLog()
    m = _member(log, clock)
    settle([m], clock)
    assert m.holdings.held == {T0, T1}
    log.gate.clear()  # the first close stops inside its first read of the log
    first = _run(m.close)
    assert log.waiting.wait(BLOCKED_S)
    second = _run(m.close)
    second.join(0.5)
    assert second.is_alive(), "the second close returned before the first had left"
    log.gate.set()
    first.join(BLOCKED_S)
    second.join(BLOCKED_S)
    assert not first.is_alive() and not second.is_alive()
    assert _kinds(log, "a").count(RecordKind.LEAVE) == 1


def test_a_commit_sent_before_close_is_in_the_log_before_the_leave() -> None:
    clock, log = ManualClock(), GatedLog()
    m = _member(log, clock)
    settle([m], clock)
    generation = m.holdings.generation
    m.begin_batch({T0: 42, T1: 7}, batch_generation=generation)
    m.commit({T0: 42, T1: 7}, batch_generation=generation, batch_member="a")
    m.close()
    mine = [r for r in log.records if r.member_id == "a"]
    kinds = [r.kind for r in mine]
    assert kinds[-1] == RecordKind.LEAVE
    # Recorded for its commit object, written directly before the LEAVE (nothing folded it).
    committed = {(r.topic, r.partition): r.offset for r in mine if r.kind == RecordKind.COMMIT}
    assert committed == {T0: 42, T1: 7}


def test_poll_is_refused_once_the_heartbeat_thread_steps_the_member() -> None:
    clock, log = ManualClock(), GatedLog()
    m = _member(log, clock)
    m.start()
    try:
        with pytest.raises(RuntimeError, match="current_holdings"):
            m.poll()
        assert m.current_holdings().member_id == "a"
    finally:
        m.close()
