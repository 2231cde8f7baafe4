"""Production group members over the in-memory log, stepped by tests and by the simulation.

:class:`SimMember` wraps a real :class:`~spark_kafka_group.member.member.GroupMember` (no
threads: the test decides when it steps) over :class:`~spark_kafka_group.store.memory.InMemoryLog`
with an injected clock. The property tests race them step by step;
:func:`spark_kafka_group.testing.simulated_group.simulate` runs a whole group of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from spark_kafka_group.errors import MemberFencedError
from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupRecord,
    GroupState,
    ManualClock,
    TopicPartition,
)
from spark_kafka_group.group.assignors import load_assignor
from spark_kafka_group.member import GroupLogClient, GroupMember, SubscriptionSpec
from spark_kafka_group.options import GroupSettings
from spark_kafka_group.store.commit_objects import CommitObjectStore
from spark_kafka_group.store.memory import InMemoryLeases, InMemoryLog


def member_settings(
    *,
    strategy: str = "cooperative-sticky",
    instance_id: str | None = None,
    session_timeout_ms: int = 10_000,
    rebalance_timeout_ms: int = 20_000,
    heartbeat_interval_ms: int = 3_000,
    initial_rebalance_delay_ms: int = 0,
    group_id: str = "g",
) -> GroupSettings:
    return GroupSettings(
        group_id=group_id,
        store="memory://",
        storage_options={},
        heartbeat_interval_ms=heartbeat_interval_ms,
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        assignment_strategy=tuple(load_assignor(e) for e in strategy.split(",")),
        instance_id=instance_id,
        scheduled_rebalance_max_delay_ms=0,
        rebalance_listener=None,
        initial_rebalance_delay_ms=initial_rebalance_delay_ms,
    )


class OffsetClock:
    """One machine's clocks over the simulation's time: its wall clock off by ``offset_ms``
    (a drifted VM, a laptop resumed from sleep), its monotonic clock from its own origin."""

    def __init__(self, base: ManualClock, offset_ms: int = 0, monotonic_origin_ms: int = 0):
        self.base = base
        self.offset_ms = offset_ms
        self.monotonic_origin_ms = monotonic_origin_ms

    def now_ms(self) -> int:
        return self.base.now_ms() + self.offset_ms

    def monotonic_ms(self) -> int:
        return self.base.now_ms() - self.monotonic_origin_ms

    def sleep(self, seconds: float) -> None:
        self.base.sleep(seconds)


class Bystander:
    """A process that only reads the group and writes what time decides (expiries, the end
    of a deadline): the CLI, or the last reader of a group whose members all stopped. It
    judges time on its own clock, from when it saw things, like a member."""

    def __init__(
        self,
        log: InMemoryLog,
        clock: OffsetClock,
        leases: InMemoryLeases | None,
        config: GroupConfig,
    ) -> None:
        self.client = GroupLogClient(
            "memory://", "g", log=log, leases=leases, clock=clock, config=config
        )

    def tick(self) -> list[GroupRecord]:
        client = self.client
        client.fold()
        client.read_leases()

        def decide(work: GroupCoordinator, now: int) -> tuple[list[GroupRecord], None]:
            return work.tick(now, client.sightings()), None

        return client.retry(lambda: client.prepare(decide), client.complete).records


class SimMember:
    """One production member, stepped by hand: :meth:`prepare` folds and decides, :meth:`finish`
    appends (deciding again after a lost race)."""

    def __init__(
        self,
        member_id: str,
        log: InMemoryLog,
        clock: ManualClock,
        metadata: Callable[[], Mapping[str, int]],
        *,
        protocols: tuple[str, ...] = ("cooperative-sticky",),
        topics: tuple[str, ...] = ("t",),
        pattern: str | None = None,
        instance_id: str | None = None,
        replaces: str | None = None,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 20_000,
        heartbeat_interval_ms: int = 3_000,
        config: GroupConfig | None = None,
        leases: InMemoryLeases | None = None,
        commit_objects: CommitObjectStore | None = None,
        features: tuple[str, ...] | None = None,
        random_seed: int | None = None,
        clock_offset_ms: int = 0,
    ) -> None:
        """``clock_offset_ms``: how far this member's wall clock is off the simulation's."""
        self.log = log
        self.instance_id = instance_id
        self.clock = OffsetClock(clock, clock_offset_ms, monotonic_origin_ms=clock_offset_ms // 3)
        self.pattern = pattern
        self.member = GroupMember(
            member_settings(
                strategy=",".join(protocols),
                instance_id=instance_id,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
            ),
            subscription=SubscriptionSpec(topics=topics, pattern=pattern),
            topic_counts=lambda: dict(metadata()),
            clock=self.clock,
            log=log,
            leases=leases,
            commit_objects=commit_objects,
            member_id=member_id,
            config=config or GroupConfig(initial_rebalance_delay_ms=0),
            features=features,
            random_seed=random_seed,
        )
        if replaces:
            self.member.loop.replace(replaces)
        #: Offsets "consumed" so far per partition (what the member would commit).
        self.position: dict[TopicPartition, int] = {}
        self._attempt: Any = None

    @property
    def member_id(self) -> str:
        return self.member.member_id

    @property
    def coord(self) -> GroupCoordinator:
        return self.member.client.coordinator

    @property
    def version(self) -> int:
        return self.member.client.version

    @property
    def fenced(self) -> bool:
        return isinstance(self.member.failure, MemberFencedError)

    def fold(self) -> None:
        self.member.client.fold()

    def prepare(self) -> None:
        """Fold and decide, without appending yet (so that members can race)."""
        self._attempt = None
        if self.member.failure is not None:
            return
        self.member.refresh_metadata()
        self._attempt = self.member.loop.begin_step(commit_objects=True)
        assignment = self.member.holdings
        for t, p in assignment.held - assignment.revoking:  # "consume" a little
            tp = TopicPartition(t, p)
            self.position[tp] = self.position.get(tp, 0) + 1

    def finish(self) -> list[GroupRecord]:
        """Append what :meth:`prepare` decided; on a conflict decide again on the newer log."""
        for _ in range(20):
            attempt = self._attempt
            if attempt is None or not attempt.records:
                return []
            if self.member.loop.end_step(attempt):
                return list(attempt.records)
            self.prepare()
        raise AssertionError("too many append conflicts")

    def step(self) -> list[GroupRecord]:
        """One poll: fold, decide, append with CAS (deciding again on conflict)."""
        self.prepare()
        return self.finish()


def append(log: InMemoryLog, records: list[GroupRecord], expected_version: int) -> bool:
    """Append ``records`` (nothing to do when empty); False on a lost race."""
    if not records:
        return True
    try:
        log.append(records, expected_version=expected_version)
    except Exception:
        return False
    return True


def wanted_partitions(coord: GroupCoordinator, metadata: Mapping[str, int]) -> set[TopicPartition]:
    g = coord.group
    return {
        TopicPartition(t, p) for t, n in g.relevant_metadata(metadata).items() for p in range(n)
    }


def converged(coord: GroupCoordinator, metadata: Mapping[str, int]) -> bool:
    """Stable, nothing being revoked, every subscribed partition owned exactly once."""
    g = coord.group
    if g.state != GroupState.STABLE or any(m.revoking for m in g.members.values()):
        return False
    owned: list[TopicPartition] = [tp for m in g.members.values() for tp in m.assignment]
    return len(owned) == len(set(owned)) and set(owned) == wanted_partitions(coord, metadata)


# -- the discrete-event simulation -------------------------------------------------------------
