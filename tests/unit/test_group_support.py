"""Test support for the group protocol: a shared in-memory log with compare-and-swap append,
and a member loop that drives the protocol the way the package docstring describes.

(Also holds a few tests of the support itself.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupError,
    GroupRecord,
    GroupState,
    JoinRequest,
    ManualClock,
    RebalanceProtocol,
    TopicPartition,
    replay,
)


def roundtrip(record: GroupRecord) -> GroupRecord:
    """What the store gives back: the payload went through JSON."""
    payload = json.loads(json.dumps(record.payload, allow_nan=False))
    return GroupRecord(
        kind=record.kind,
        timestamp_ms=record.timestamp_ms,
        member_id=record.member_id,
        instance_id=record.instance_id,
        generation=record.generation,
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        payload=payload,
    )


@dataclass
class SharedLog:
    """A list with compare-and-swap append: version N+1 only after folding version N."""

    records: list[GroupRecord] = field(default_factory=list)
    conflicts: int = 0

    @property
    def version(self) -> int:
        return len(self.records)

    def append(self, records: list[GroupRecord], expected_version: int) -> bool:
        if expected_version != len(self.records):
            self.conflicts += 1
            return False
        self.records.extend(roundtrip(r) for r in records)
        return True


@dataclass
class Driver:
    """One member's loop over a :class:`SharedLog`."""

    member_id: str
    log: SharedLog
    clock: ManualClock
    metadata: Callable[[], Mapping[str, int]]
    protocols: tuple[str, ...] = ("cooperative-sticky",)
    topics: tuple[str, ...] = ("t",)
    pattern: str | None = None
    instance_id: str | None = None
    #: A dynamic member's previous incarnation (a query restarted from its checkpoint).
    replaces: str | None = None
    session_timeout_ms: int = 10_000
    rebalance_timeout_ms: int = 20_000
    heartbeat_interval_ms: int = 3_000
    config: GroupConfig = field(default_factory=GroupConfig)
    group_id: str = "g"
    #: Offsets consumed so far per partition (what the member would commit).
    position: dict[TopicPartition, int] = field(default_factory=dict)
    fenced: bool = False
    last_error: GroupError | None = None

    def __post_init__(self) -> None:
        self.coord = GroupCoordinator(self.group_id, self.config)
        self.version = 0
        self.last_heartbeat = -(10**12)

    def fold(self) -> None:
        self.coord.apply_all(self.log.records[self.version :])
        self.version = self.log.version

    def prepare(self) -> None:
        """Fold and decide, without appending yet (so that members can race)."""
        self.fold()
        work = self.coord.fork()
        now = self.clock.now_ms()
        records = work.tick(now)
        work.apply_all(records)
        records += self._decide(work, now)
        self._pending = (records, self.version)

    def finish(self) -> list[GroupRecord]:
        """Append what :meth:`prepare` decided; on a CAS conflict fold and decide again."""
        records, version = self._pending
        for _ in range(20):
            if not records:
                return []
            if self.log.append(records, version):
                self.fold()
                return records
            self.prepare()
            records, version = self._pending
        raise AssertionError("too many append conflicts")

    def step(self) -> list[GroupRecord]:
        """One poll: tick, decide, append with CAS (re-deciding on conflict)."""
        self.prepare()
        return self.finish()

    def _do(self, work: GroupCoordinator, result: tuple[list[GroupRecord], object]) -> object:
        records, response = result
        work.apply_all(records)
        self._out.extend(records)
        error = getattr(response, "error", GroupError.NONE)
        if error is not GroupError.NONE:
            self.last_error = error
        if error is GroupError.FENCED_INSTANCE_ID:
            self.fenced = True
        return response

    def _decide(self, work: GroupCoordinator, now: int) -> list[GroupRecord]:
        self._out: list[GroupRecord] = []
        view = work.member_view(self.member_id)
        if self.fenced or view.fenced:
            self.fenced = True
            return []
        gen = view.member_generation
        if view.needs_join:
            held = set(view.assignment) | set(view.revoking)
            if held and work.rebalance_protocol() is RebalanceProtocol.EAGER:
                # eager: final commit of everything before giving it up
                self._do(work, work.commit_offsets(self.member_id, gen, self._final(held), now))
            self._do(work, work.join(self._join_request(), now))
        elif view.awaiting_join:
            self._heartbeat(work, gen, now)
        elif view.awaiting_sync:
            if view.is_leader:
                self._do(work, work.sync(self.member_id, gen, now, metadata=dict(self.metadata())))
            else:
                self._heartbeat(work, gen, now)
        elif view.state == GroupState.STABLE:
            if view.revoking:
                offsets = self._final(set(view.revoking))
                if offsets:
                    self._do(
                        work,
                        work.commit_offsets(self.member_id, gen, offsets, now, revoke=True),
                    )
                else:
                    self._do(work, work.ack_revocation(self.member_id, gen, view.revoking, now))
            for tp in view.assignment:  # "consume" a little
                self.position[tp] = self.position.get(tp, 0) + 1
            if work.group.state == GroupState.STABLE:
                self._do(work, work.metadata_changed(self.member_id, dict(self.metadata()), now))
            if work.group.state == GroupState.STABLE:
                self._heartbeat(work, gen, now)
        return self._out

    def _heartbeat(self, work: GroupCoordinator, gen: int, now: int) -> None:
        if now - self.last_heartbeat >= self.heartbeat_interval_ms:
            self.last_heartbeat = now
            self._do(work, work.heartbeat(self.member_id, gen, now, instance_id=self.instance_id))

    def _final(self, partitions: set[TopicPartition]) -> dict[tuple[str, int], int]:
        return {tp: self.position[tp] for tp in sorted(partitions) if tp in self.position}

    def _join_request(self) -> JoinRequest:
        return JoinRequest(
            member_id=self.member_id,
            protocols=self.protocols,
            topics=self.topics,
            pattern=self.pattern,
            instance_id=self.instance_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            replaces=self.replaces,
        )


def converged(coord: GroupCoordinator, metadata: Mapping[str, int]) -> bool:
    """Stable, nothing being revoked, every subscribed partition owned exactly once."""
    g = coord.group
    if g.state != GroupState.STABLE or any(m.revoking for m in g.members.values()):
        return False
    wanted = {
        TopicPartition(t, p) for t, n in g.relevant_metadata(metadata).items() for p in range(n)
    }
    owned: list[TopicPartition] = [tp for m in g.members.values() for tp in m.assignment]
    return len(owned) == len(set(owned)) and set(owned) == wanted


def test_shared_log_rejects_a_stale_append() -> None:
    log = SharedLog()
    assert log.append([GroupRecord("HEARTBEAT", 1)], 0) is False or log.version == 1
    assert log.append([GroupRecord("HEARTBEAT", 2)], 0) is False
    assert log.conflicts == 1


def test_driver_alone_becomes_stable_with_every_partition() -> None:
    clock = ManualClock(1_000)
    log = SharedLog()
    meta = {"t": 4}
    d = Driver("m1", log, clock, lambda: meta)
    for _ in range(5):
        d.step()
        clock.advance(100)
    assert converged(d.coord, meta)
    assert replay(log.records, "g") == d.coord.group
