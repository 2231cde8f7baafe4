"""What the handlers share (the classic group's in :mod:`.coordinator`, the offsets' in
:mod:`.offsets`): the member check of every request, and the scratch group that a handler
writing several records folds them into to decide the next one.

Every handler is a pure function of the folded group, a request and the time, returning
``(records, response)``; it never applies its records to anything outside its scratch. The
caller applies them, always through replay
(:class:`~spark_kafka_group.group.coordinator.GroupCoordinator` ``apply_all`` after the append;
``member.decide`` and the operator's commands on their fork while they chain handlers).
"""

from __future__ import annotations

from collections.abc import Iterable

from spark_kafka_group.group import replay
from spark_kafka_group.group.clocks import Sightings, SingleClock
from spark_kafka_group.group.errors import GroupError
from spark_kafka_group.group.metadata import GroupMetadata, MemberMetadata
from spark_kafka_group.group.records import GroupRecord
from spark_kafka_group.group.state import GroupState


class Scratch:
    """Records being decided, folded into a copy of the group as they are added (copied at
    the first record: most ticks decide nothing, and a copy of a large group is not free)."""

    def __init__(self, group: GroupMetadata) -> None:
        self._origin = group
        self._copy: GroupMetadata | None = None
        self.records: list[GroupRecord] = []

    @property
    def group(self) -> GroupMetadata:
        """The group with the records so far (read it again after every :meth:`add`)."""
        return self._origin if self._copy is None else self._copy

    def add(self, record: GroupRecord) -> None:
        if self._copy is None:
            self._copy = self._origin.copy()
        replay.apply(self._copy, record)
        self.records.append(record)

    def add_all(self, records: Iterable[GroupRecord]) -> None:
        for record in records:
            self.add(record)


def sightings(seen: Sightings | None, now_ms: int) -> Sightings:
    """The decider's sightings; without them, the one-clock world of the unit tests."""
    return SingleClock(now_ms) if seen is None else seen


def unavailable(g: GroupMetadata) -> GroupError | None:
    """COORDINATOR_NOT_AVAILABLE for a deleted (Dead) group, else None."""
    return GroupError.COORDINATOR_NOT_AVAILABLE if g.state == GroupState.DEAD else None


def check_member(
    g: GroupMetadata, member_id: str | None, instance_id: str | None
) -> tuple[GroupError, MemberMetadata | None]:
    """Who sent a request, as Kafka validates it: the member (None with the error when it is
    unknown, or fenced by a newer incarnation of its static instance)."""
    err = unavailable(g)
    if err is not None:
        return err, None
    if member_id is not None and member_id in g.fenced:
        return GroupError.FENCED_INSTANCE_ID, None
    if instance_id is not None:
        mapped = g.static_members.get(instance_id)
        if mapped is not None and mapped != member_id:
            return GroupError.FENCED_INSTANCE_ID, None
    member = g.member(member_id)
    if member is None:
        return GroupError.UNKNOWN_MEMBER_ID, None
    if instance_id is not None and member.instance_id != instance_id:
        return GroupError.FENCED_INSTANCE_ID, None
    return GroupError.NONE, member
