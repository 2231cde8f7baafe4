"""The classic group's handlers (Kafka's ``GroupMetadataManager``): pure functions of the folded
group, a request and now_ms. The committed offsets' handlers are their peers in :mod:`.offsets`.

Every handler returns ``(records, response)`` and changes nothing. The caller appends the
records to the group log (compare-and-swap on the log version) and then folds them
(:meth:`GroupCoordinator.apply_all`); if the append loses the race it folds the newer records
and calls the handler again. A handler that needs more than one record (a join that completes
the join phase, a leave that empties the group) folds its own records into a scratch copy to
decide the next one, so what it predicts is exactly what replay will do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spark_kafka_group.group import replay
from spark_kafka_group.group.assignment import sync_payload
from spark_kafka_group.group.assignors import RebalanceProtocol
from spark_kafka_group.group.clocks import (
    Sightings,
    SingleClock,
    rebalance_deadline_ms,
    silent_past_session,
    window_end_ms,
)
from spark_kafka_group.group.config import GroupConfig
from spark_kafka_group.group.description import GroupDescription, MemberDescription
from spark_kafka_group.group.errors import GroupError
from spark_kafka_group.group.handling import Scratch, check_member, sightings, unavailable
from spark_kafka_group.group.join import ClassicJoin
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.messages import (
    DeleteResponse,
    HeartbeatResponse,
    JoinRequest,
    JoinResponse,
    LeaveResponse,
    MemberView,
    MetadataResponse,
    RevokeResponse,
    SyncResponse,
)
from spark_kafka_group.group.metadata import (
    LEASES,
    GroupMetadata,
    MemberMetadata,
    TopicPartition,
)
from spark_kafka_group.group.payloads import RevokePayload
from spark_kafka_group.group.record_helpers import (
    delete_record,
    expire_record,
    heartbeat_record,
    leave_record,
    metadata_record,
    rebalance_record,
    revoke_record,
    snapshot_record,
    sync_record,
)
from spark_kafka_group.group.records import GroupRecord
from spark_kafka_group.group.state import GroupState

S = GroupState
E = GroupError


class GroupCoordinator:
    """One group's coordinator, as every member runs it over the shared group log."""

    def __init__(
        self,
        group_id: str,
        config: GroupConfig | None = None,
        group: GroupMetadata | None = None,
    ) -> None:
        self.config = config or GroupConfig()
        self._group = group if group is not None else GroupMetadata(group_id)
        #: A fork reads its parent's state until its first record, then copies it.
        self._shared = False

    # ------------------------------------------------------------------ state

    @property
    def group(self) -> GroupMetadata:
        """The folded state (read it, never change it: only replay does)."""
        return self._group

    @property
    def group_id(self) -> str:
        return self._group.group_id

    def apply(self, record: GroupRecord) -> None:
        self._own()
        replay.apply(self._group, record)

    def apply_all(self, records: Iterable[GroupRecord]) -> None:
        for record in records:
            self.apply(record)

    def _own(self) -> None:
        if self._shared:
            self._group = self._group.copy()
            self._shared = False

    def fork(self) -> GroupCoordinator:
        """An independent coordinator over a copy of the state (to chain several handlers
        before one compare-and-swap append). The copy is made at the fork's first record:
        most member steps decide to write nothing, and copying a large group is not free.
        Do not fold into this coordinator while the fork is in use."""
        fork = GroupCoordinator(self.group_id, self.config, self._group)
        fork._shared = True
        return fork

    def snapshot_record(self, now_ms: int) -> GroupRecord:
        """A SNAPSHOT record holding the complete state; replay may start from it."""
        return snapshot_record(now_ms=now_ms, group=self._group)

    def rebalance_protocol(self) -> RebalanceProtocol | None:
        """Eager or cooperative, for the group's current protocol (None: no protocol yet)."""
        return ClassicJoin(self._group, self.config).rebalance_protocol()

    # ------------------------------------------------------------------ join

    def join(
        self, request: JoinRequest, now_ms: int, *, seen: Sightings | None = None
    ) -> tuple[list[GroupRecord], JoinResponse]:
        """JoinGroup: join, rejoin for a rebalance, or replace a static instance (KIP-345), by
        Kafka's three paths (:class:`~spark_kafka_group.group.join.ClassicJoin`). ``seen``:
        the joiner's sightings (see :mod:`.clocks`), for the initial delay."""
        return ClassicJoin(self._group, self.config).join(request, now_ms, seen=seen)

    # ------------------------------------------------------------------ sync

    def sync(
        self,
        member_id: str,
        generation: int,
        now_ms: int,
        *,
        instance_id: str | None = None,
        metadata: Mapping[str, int] | None = None,
        seen: Sightings | None = None,
    ) -> tuple[list[GroupRecord], SyncResponse]:
        """SyncGroup. The leader passes the topic metadata it sees (topic -> partition count;
        all topics when a pattern is subscribed) and writes the assignment; the others read
        theirs (``pending`` until the leader has written it). ``seen``: the leader's
        sightings, for what remains of scheduled delays."""
        err, m = check_member(self._group, member_id, instance_id)
        if m is None:
            return [], SyncResponse(err)
        g = self._group
        if g.state == S.PREPARING_REBALANCE:
            return [], SyncResponse(E.REBALANCE_IN_PROGRESS)
        if generation != g.generation or m.generation != g.generation:
            return [], SyncResponse(E.ILLEGAL_GENERATION)
        if g.state == S.STABLE:
            return [], self._sync_response(g, member_id)
        if member_id != g.leader:
            return [], SyncResponse(E.NONE, g.generation, g.protocol, pending=True)
        assignor = self.config.assignors.get(g.protocol or "")
        if assignor is None:
            return [], SyncResponse(E.INCONSISTENT_GROUP_PROTOCOL, g.generation, g.protocol)
        snapshot = dict(metadata) if metadata is not None else dict(g.latest_metadata or {})
        payload = sync_payload(g, assignor, snapshot, now_ms, sightings(seen, now_ms))
        scratch = Scratch(g)
        scratch.add(
            sync_record(now_ms=now_ms, leader=member_id, generation=g.generation, payload=payload)
        )
        return scratch.records, self._sync_response(scratch.group, member_id)

    def _sync_response(self, g: GroupMetadata, mid: str) -> SyncResponse:
        m = g.members[mid]
        return SyncResponse(
            E.NONE,
            g.generation,
            g.protocol,
            assignment=m.assignment,
            revoking=m.revoking,
            delay_ms=g.delay_ms,
        )

    # ------------------------------------------------------------------ heartbeat / leave

    def heartbeat(
        self, member_id: str, generation: int, now_ms: int, *, instance_id: str | None = None
    ) -> tuple[list[GroupRecord], HeartbeatResponse]:
        """Heartbeat: REBALANCE_IN_PROGRESS tells a member it must rejoin."""
        err, m = check_member(self._group, member_id, instance_id)
        if m is None:
            return [], HeartbeatResponse(err)
        g = self._group
        waiting = g.state == S.PREPARING_REBALANCE and m.joined
        if generation != g.generation or m.generation != g.generation:
            if not waiting:  # a member that joined this rebalance just waits for the rest
                return [], HeartbeatResponse(E.ILLEGAL_GENERATION)
        elif g.state == S.PREPARING_REBALANCE and not m.joined:
            err = E.REBALANCE_IN_PROGRESS
        record = heartbeat_record(now_ms=now_ms, member_id=member_id, generation=generation)
        return [record], HeartbeatResponse(err)

    def leave(
        self,
        member_id: str,
        now_ms: int,
        *,
        instance_id: str | None = None,
        reason: str = "",
        seen: Sightings | None = None,
    ) -> tuple[list[GroupRecord], LeaveResponse]:
        """LeaveGroup (a graceful leave; static members do not call it on restart).
        ``seen``: the leaver's sightings, in case its leave completes a join phase."""
        err, m = check_member(self._group, member_id, instance_id)
        if m is None:
            return [], LeaveResponse(err)
        scratch = Scratch(self._group)
        scratch.add(
            leave_record(
                now_ms=now_ms,
                member_id=member_id,
                instance_id=m.instance_id,
                generation=self._group.generation,
                reason=reason or "member left",
            )
        )
        joining = ClassicJoin(self._group, self.config)
        joining.maybe_complete(scratch, now_ms, sightings(seen, now_ms), writer=None)
        return scratch.records, LeaveResponse(E.NONE)

    # ------------------------------------------------------------------ revocation

    def ack_revocation(
        self,
        member_id: str,
        generation: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
        *,
        instance_id: str | None = None,
    ) -> tuple[list[GroupRecord], RevokeResponse]:
        """The member stopped consuming these revoked partitions (nothing left to commit)."""
        err, m = check_member(self._group, member_id, instance_id)
        if m is None:
            return [], RevokeResponse(err)
        if generation != self._group.generation or m.generation != self._group.generation:
            return [], RevokeResponse(E.ILLEGAL_GENERATION)
        tps = [TopicPartition(t, int(p)) for t, p in partitions]
        record = self._revoke_record(member_id, tps, now_ms)
        if record is None:
            return [], RevokeResponse(E.NONE)
        released = RevokePayload.of(record).partitions
        return [record], RevokeResponse(E.NONE, released)

    def _revoke_record(
        self, member_id: str, partitions: Iterable[TopicPartition], now_ms: int
    ) -> GroupRecord | None:
        g = self._group
        m = g.members[member_id]
        released = set(partitions) & m.revoking
        if not released:
            return None
        snap = g.assignment_snapshot or {}
        wanted = any(0 <= tp.partition < snap.get(tp.topic, 0) for tp in released)
        return revoke_record(
            now_ms=now_ms,
            member_id=member_id,
            generation=g.generation,
            partitions=released,
            rebalance=g.state == S.STABLE and wanted,
        )

    # ------------------------------------------------------------------ metadata

    def metadata_changed(
        self,
        member_id: str,
        snapshot: Mapping[str, int],
        now_ms: int,
        *,
        instance_id: str | None = None,
    ) -> tuple[list[GroupRecord], MetadataResponse]:
        """A member saw topic metadata (topic -> partition count; every topic it knows when a
        pattern is subscribed). If the group's subscribed topics differ from what the last
        assignment used, record it and rebalance."""
        err, m = check_member(self._group, member_id, instance_id)
        if m is None:
            return [], MetadataResponse(err)
        g = self._group
        relevant = g.relevant_metadata(snapshot)
        if g.state == S.STABLE:
            rebalance = relevant != (g.assignment_snapshot or {})
            if not rebalance:
                return [], MetadataResponse(E.NONE)
        else:
            rebalance = False
            if relevant == (g.latest_metadata or {}):
                return [], MetadataResponse(E.NONE)
        record = metadata_record(
            now_ms=now_ms,
            member_id=member_id,
            generation=g.generation,
            snapshot=relevant,
            rebalance=rebalance,
        )
        return [record], MetadataResponse(E.NONE, rebalance)

    # ------------------------------------------------------------------ time

    def tick(self, now_ms: int, seen: Sightings | None = None) -> list[GroupRecord]:
        """Time-driven records anyone may write: session expiry, members dropped at the
        rebalance timeout, a leader that never synced, and the end of a scheduled delay.

        ``now_ms``: the writer's wall clock, stamped on the records. ``seen``: what the writer
        saw and when, on its own clock (:mod:`.clocks`): a member is silent when neither a
        record of it nor a change of its lease (:mod:`spark_kafka_group.store.leases`) was
        seen for its session timeout, and a window ends its length after the writer saw the
        record that opened it. No time another machine wrote is compared with this clock.
        """
        seen = sightings(seen, now_ms)
        g = self._group
        if g.state in (S.DEAD, S.EMPTY):
            return []
        scratch = Scratch(g)
        for mid in list(g.members):
            s = scratch.group
            m = s.members.get(mid)
            if m is None:
                continue
            waiting = s.state == S.COMPLETING_REBALANCE or (
                s.state == S.PREPARING_REBALANCE and m.joined
            )
            if waiting and LEASES not in m.profile.features:
                # Awaiting join / sync keeps a member alive (as in Kafka, whose members do
                # not heartbeat while a JoinGroup is pending). A member on a lease keeps
                # renewing it meanwhile, and may have "rejoined" implicitly while dead.
                continue
            if silent_past_session(m, seen):
                scratch.add(self._expire(m, now_ms, "session_timeout"))
        if self._past_deadline(scratch.group, seen, S.PREPARING_REBALANCE):
            for m in [m for m in scratch.group.members.values() if not m.joined]:
                scratch.add(self._expire(m, now_ms, "rebalance_timeout"))
        ClassicJoin(self._group, self.config).maybe_complete(scratch, now_ms, seen, writer=None)
        s = scratch.group
        if self._past_deadline(s, seen, S.COMPLETING_REBALANCE) and s.leader is not None:
            # The leader never wrote the assignment: drop it so another member leads.
            scratch.add(self._expire(s.members[s.leader], now_ms, "sync_timeout"))
        s = scratch.group
        if s.state == S.STABLE and any(
            window_end_ms(seen, d.opened, d.until_ms) <= seen.now_ms for d in s.scheduled.values()
        ):
            scratch.add(rebalance_record(now_ms=now_ms, reason="scheduled rebalance delay expired"))
        return scratch.records

    @staticmethod
    def _past_deadline(g: GroupMetadata, seen: Sightings, state: GroupState) -> bool:
        """The group is in ``state`` and its rebalance deadline has passed (decider's clock)."""
        deadline = rebalance_deadline_ms(g, seen)
        return g.state == state and deadline is not None and seen.now_ms >= deadline

    def _expire(self, m: MemberMetadata, now_ms: int, reason: str) -> GroupRecord:
        delay = self.config.scheduled_rebalance_max_delay_ms
        until = now_ms + delay if delay > 0 and m.instance_id and m.assignment else None
        return expire_record(
            now_ms=now_ms,
            member_id=m.member_id,
            instance_id=m.instance_id,
            generation=self._group.generation,
            reason=reason,
            delay_until_ms=until,
        )

    # ------------------------------------------------------------------ admin

    def delete_group(self, now_ms: int) -> tuple[list[GroupRecord], DeleteResponse]:
        """DeleteGroups: only an Empty group (its offsets go with it)."""
        err = unavailable(self._group)
        if err is not None:
            return [], DeleteResponse(err)
        if self._group.state != S.EMPTY:
            return [], DeleteResponse(E.NON_EMPTY_GROUP)
        return [delete_record(now_ms=now_ms)], DeleteResponse(E.NONE)

    def describe(
        self,
        now_ms: int,
        *,
        seen: Sightings | None = None,
        leases: Mapping[str, int] | None = None,
        uri: str = "",
        version: int = -1,
    ) -> GroupDescription:
        """DescribeGroups, as of ``now_ms``; ``seen`` as for :meth:`tick`; ``uri`` and
        ``version``: where the caller folded the group from. A member is live unless
        :meth:`tick` would expire it now: the one rule for liveness.

        Shown to people, never decided on. ``last_seen_ms`` is always a writer's clock: the
        member's newest record, or its newest lease renewal number in ``leases`` (a renewal
        number is its writer's clock in ms while that clock runs forward). A one-shot process
        (the CLI) has watched nobody change, so without ``seen`` liveness is judged on those
        writer timestamps against ``now_ms`` (:class:`SingleClock`): a member on a machine
        whose clock is off may be shown wrongly, but is never expired for it."""
        g = self._group
        leases = leases or {}
        seen = seen if seen is not None else SingleClock(now_ms, leases)
        expiring = {r.member_id for r in self.tick(now_ms, seen) if r.kind == RecordKind.EXPIRE}
        return GroupDescription(
            error=E.NONE,
            group_id=g.group_id,
            state=g.state,
            protocol_type=g.protocol_type,
            protocol=g.protocol,
            generation=g.generation,
            leader=g.leader,
            now_ms=now_ms,
            members=tuple(
                MemberDescription(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    client_id=m.profile.client_id,
                    client_host=m.profile.client_host,
                    generation=m.generation,
                    assignment=m.assignment,
                    revoking=m.revoking,
                    session_timeout_ms=m.profile.session_timeout_ms,
                    last_seen_ms=max(m.last_seen_ms, leases.get(m.member_id, 0)),
                    live=m.member_id not in expiring,
                )
                for m in g.members.values()
            ),
            offsets=dict(sorted(g.offsets.items())),
            assignment_snapshot=(
                None if g.assignment_snapshot is None else dict(g.assignment_snapshot)
            ),
            last_record_ms=g.last_record_ms,
            uri=uri,
            version=version,
        )

    def member_view(self, member_id: str) -> MemberView:
        """What ``member_id`` should do next (see the package docstring)."""
        g = self._group
        m = g.member(member_id)
        known = m is not None
        preparing = g.state == S.PREPARING_REBALANCE
        return MemberView(
            member_id=member_id,
            state=g.state,
            group_generation=g.generation,
            known=known,
            fenced=member_id in g.fenced,
            needs_join=member_id not in g.fenced
            and g.state != S.DEAD
            and (m is None or (preparing and not m.joined)),
            awaiting_join=m is not None and preparing and m.joined,
            awaiting_sync=m is not None and g.state == S.COMPLETING_REBALANCE,
            is_leader=known and g.leader == member_id,
            member_generation=m.generation if m else -1,
            assignment=m.assignment if m else frozenset(),
            revoking=m.revoking if m else frozenset(),
            delay_ms=g.delay_ms,
            protocol=g.protocol,
            gives_up_at_join=m is not None
            and preparing
            and not m.joined
            and bool(m.assignment or m.revoking)
            and self.rebalance_protocol() is RebalanceProtocol.EAGER,
        )
