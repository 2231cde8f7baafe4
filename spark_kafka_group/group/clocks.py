"""Time in decisions: one clock per decider, never two machines' clocks compared.

Members of one group run on different machines whose wall clocks disagree. Kafka judges
liveness and deadlines with one clock, the coordinator's; a shared log gets the same property
this way:

- Every record written carries its writer's wall clock (``timestamp_ms``), and a deadline in a
  record is that writer's ``timestamp_ms + duration``. Only the difference of the two is read
  back: a duration, measured on one clock.
- Replay numbers the records it folds (``GroupMetadata.seq``) and remembers which record opened
  each window (an :class:`~spark_kafka_group.group.metadata.Opened`) and which record last came
  from each member (``MemberMetadata.last_seen_seq``). No clock is read.
- A member that decides (expires someone, completes a join, ends a scheduled delay) asks its
  :class:`Sightings`: when did *it* first see that record, on its own monotonic clock, and when
  did *it* last see that member's lease change. A window ends at its opening sighting plus its
  duration; a member is silent when nothing of it was seen change for its session timeout.
  A process that starts later sees the whole history at its start: conservative, never early.
- The decision is written as a record (EXPIRE, GENERATION, REBALANCE, SYNC), so every member
  still agrees through replay, and replay never judges time again.

:class:`SingleClock` is the world of one clock, where a record is seen when it is written and a
lease renewal's number is its time: the unit tests, and what is only *shown* to people (the
CLI's ``describe`` on a one-shot process shows writer timestamps and says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from spark_kafka_group.group.metadata import GroupMetadata, MemberMetadata, Opened


class Sightings(Protocol):
    """What one decider saw, and when, on its own clock (the clock of :attr:`now_ms`)."""

    @property
    def now_ms(self) -> int:
        """The decider's clock now."""
        ...

    def record_ms(self, opened: Opened) -> int:
        """When the decider first saw the record ``opened`` names (now, if it has not yet:
        it is being written)."""
        ...

    def heard_ms(self, member: MemberMetadata) -> int:
        """When the decider last saw ``member`` alive: a record of it, or its lease change."""
        ...


def window_end_ms(seen: Sightings, opened: Opened, until_ms: int) -> int:
    """When a window opened by record ``opened`` and written as ``until_ms`` (the opening
    writer's clock) ends, on the decider's clock."""
    return seen.record_ms(opened) + max(0, until_ms - opened.written_ms)


def silent_past_session(member: MemberMetadata, seen: Sightings) -> bool:
    """Nothing of ``member`` (record or lease change) was seen for its session timeout."""
    return seen.now_ms - seen.heard_ms(member) > member.profile.session_timeout_ms


def rebalance_deadline_ms(group: GroupMetadata, seen: Sightings) -> int | None:
    """When the current rebalance phase (join, or the leader's sync) runs out, if it can."""
    if group.deadline_ms is None:
        return None
    return window_end_ms(seen, group.deadline_opened, group.deadline_ms)


def join_delay_end_ms(group: GroupMetadata, seen: Sightings) -> int | None:
    """When the initial rebalance delay ends (at the latest, the rebalance deadline)."""
    if group.join_delay_until_ms is None:
        return None
    end = window_end_ms(seen, group.join_delay_opened, group.join_delay_until_ms)
    deadline = rebalance_deadline_ms(group, seen)
    return end if deadline is None else min(end, deadline)


class SingleClock:
    """One clock for everyone: a record is seen when written, a lease renewal's number is its
    writer's time in ms. True in unit tests with one clock; elsewhere only good for *showing*
    writer timestamps to people, never for a decision."""

    def __init__(self, now_ms: int, leases: Mapping[str, int] | None = None) -> None:
        self._now = now_ms
        self._leases = leases or {}

    @property
    def now_ms(self) -> int:
        return self._now

    def record_ms(self, opened: Opened) -> int:
        return opened.written_ms

    def heard_ms(self, member: MemberMetadata) -> int:
        return max(member.last_seen_ms, self._leases.get(member.member_id, member.last_seen_ms))


class LocalSightings:
    """A decider's own sightings (see :class:`Watch`), frozen for one decision."""

    def __init__(
        self, now_ms: int, records: Mapping[int, int], lease_changes: Mapping[str, int]
    ) -> None:
        self._now = now_ms
        self._records = records
        self._leases = lease_changes

    @property
    def now_ms(self) -> int:
        return self._now

    def _seq_ms(self, seq: int) -> int:
        # A record the group names but this process has not folded is being written now.
        return self._records.get(seq, self._now)

    def record_ms(self, opened: Opened) -> int:
        return self._seq_ms(opened.seq)

    def heard_ms(self, member: MemberMetadata) -> int:
        heard = self._seq_ms(member.last_seen_seq)
        lease = self._leases.get(member.member_id)
        return heard if lease is None else max(heard, lease)


class Watch:
    """What one process saw of a group, and when, on its own monotonic clock.

    ``saw_log(group, now)`` after every fold: the records the group names (that opened a
    window, or last came from a member) and that this process had not seen before were seen
    ``now`` (the first fold of a process sees all history at its start). Only those are kept,
    so the watch stays as small as the group. ``saw_leases(numbers, now)`` after every lease
    listing: a member whose renewal number grew was alive at ``now``. Renewal numbers only
    ever grow (see :mod:`spark_kafka_group.store.leases`); what they are is never read, only
    that they changed.
    """

    def __init__(self) -> None:
        #: Record seq -> when this process first saw it (only the records the group names).
        self._records: dict[int, int] = {}
        self._lease_numbers: dict[str, int] = {}
        self._lease_changes: dict[str, int] = {}

    def saw_log(self, group: GroupMetadata, now_ms: int) -> None:
        named = _named_records(group)
        self._records = {seq: self._records.get(seq, now_ms) for seq in named}

    def saw_leases(self, numbers: Mapping[str, int], now_ms: int) -> None:
        for member_id, number in numbers.items():
            if number > self._lease_numbers.get(member_id, -1):
                self._lease_numbers[member_id] = number
                self._lease_changes[member_id] = now_ms

    def forget_member(self, member_id: str) -> None:
        self._lease_numbers.pop(member_id, None)
        self._lease_changes.pop(member_id, None)

    def sightings(self, now_ms: int) -> LocalSightings:
        return LocalSightings(now_ms, dict(self._records), dict(self._lease_changes))


def _named_records(group: GroupMetadata) -> set[int]:
    """The records a group's windows and members count from."""
    seqs = {m.last_seen_seq for m in group.members.values()}
    if group.deadline_ms is not None:
        seqs.add(group.deadline_opened.seq)
    if group.join_delay_until_ms is not None:
        seqs.add(group.join_delay_opened.seq)
    seqs.update(d.opened.seq for d in group.scheduled.values())
    return seqs
