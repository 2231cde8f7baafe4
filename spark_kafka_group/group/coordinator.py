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

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from spark_kafka_group.group import replay
from spark_kafka_group.group.assignment import sync_payload
from spark_kafka_group.group.assignors import RebalanceProtocol
from spark_kafka_group.group.clocks import (
    Sightings,
    SingleClock,
    join_delay_end_ms,
    rebalance_deadline_ms,
    silent_past_session,
    window_end_ms,
)
from spark_kafka_group.group.config import GroupConfig
from spark_kafka_group.group.description import GroupDescription, MemberDescription
from spark_kafka_group.group.errors import GroupError
from spark_kafka_group.group.handling import Scratch, check_member, unavailable
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
    IMPLICIT_REJOIN,
    LEASES,
    GroupMetadata,
    MemberMetadata,
    Subscription,
    TopicPartition,
)
from spark_kafka_group.group.payloads import GenerationPayload, JoinPayload, RevokePayload
from spark_kafka_group.group.record_helpers import (
    delete_record,
    expire_record,
    generation_record,
    heartbeat_record,
    join_record,
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


#: A join's protocols: (name, metadata) pairs, the metadata in canonical JSON form.
Protocols = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class _Join:
    """A JoinGroup request that passed its own checks, on its way down one join path."""

    request: JoinRequest
    protocols: Protocols
    now_ms: int
    seen: Sightings | None

    @property
    def subscription(self) -> Subscription:
        return Subscription(tuple(self.request.topics), self.request.pattern)


def _metadata_changed(previous: MemberMetadata, join: _Join) -> bool:
    """The joiner's protocols or subscription differ from the member it rejoins as."""
    return previous.protocols != join.protocols or previous.subscription != join.subscription


def _sightings(seen: Sightings | None, now_ms: int) -> Sightings:
    """The decider's sightings; without them, the one-clock world of the unit tests."""
    return SingleClock(now_ms) if seen is None else seen


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
        protocol = self._group.protocol
        if protocol is None:
            return None
        assignor = self.config.assignors.get(protocol)
        return assignor.rebalance_protocol if assignor else RebalanceProtocol.EAGER

    # ------------------------------------------------------------------ join

    def join(
        self, request: JoinRequest, now_ms: int, *, seen: Sightings | None = None
    ) -> tuple[list[GroupRecord], JoinResponse]:
        """JoinGroup: join, rejoin for a rebalance, or replace a static instance (KIP-345).
        ``seen``: the joiner's sightings (see :mod:`.clocks`), for the initial delay.

        As Kafka's ``GroupMetadataManager`` splits the classic join, after the request's checks
        a join takes one of three paths: a new member's, an existing member's, or a static
        member's new incarnation (also a restarted query naming its previous incarnation),
        which replaces the old member in place."""
        mid = request.member_id
        checked = self._check_join(request)
        if isinstance(checked, GroupError):
            return [], JoinResponse(checked, mid)
        join = _Join(request, checked, now_ms, seen)
        existing = self._group.member(mid)
        replaces = self._replaced_incarnation(request, existing)
        others = [m for k, m in self._group.members.items() if k not in (mid, replaces)]
        if not self._protocols_fit(join, others):
            return [], JoinResponse(E.INCONSISTENT_GROUP_PROTOCOL, mid)
        if replaces is not None:
            return self._join_static_member(join, replaces)
        if existing is None:
            return self._join_new_member(join)
        return self._join_existing_member(join, existing)

    def _check_join(self, request: JoinRequest) -> GroupError | Protocols:
        """The request's own checks; its protocols in canonical JSON form if it passes (so
        that live and replayed states compare equal)."""
        err = unavailable(self._group)
        if err is not None:
            return err
        cfg = self.config
        if not request.member_id:
            return E.INVALID_REQUEST
        timeout = request.session_timeout_ms
        if not cfg.min_session_timeout_ms <= timeout <= cfg.max_session_timeout_ms:
            return E.INVALID_SESSION_TIMEOUT
        if request.rebalance_timeout_ms <= 0:
            return E.INVALID_REQUEST
        try:
            protocols = tuple(
                (str(n), json.loads(json.dumps(md, allow_nan=False)))
                for n, md in request.protocol_pairs()
            )
        except (TypeError, ValueError):
            return E.INVALID_REQUEST
        if not protocols or not request.protocol_type:
            return E.INCONSISTENT_GROUP_PROTOCOL
        mid = request.member_id
        existing = self._group.member(mid)
        if mid in self._group.fenced or (
            existing is not None and existing.instance_id != request.instance_id
        ):
            return E.FENCED_INSTANCE_ID
        return protocols

    def _replaced_incarnation(
        self, request: JoinRequest, existing: MemberMetadata | None
    ) -> str | None:
        """The member this join replaces: the instance's current member when a static
        instance joins with a new member id (it is fenced), or a restarted query's previous
        incarnation (a dynamic member it names, still in the group)."""
        g, mid = self._group, request.member_id
        if request.instance_id is not None:
            mapped = g.static_members.get(request.instance_id)
            return mapped if mapped is not None and mapped != mid else None
        if existing is None and request.replaces not in (None, mid):
            previous = g.member(request.replaces)
            if previous is not None and previous.instance_id is None:
                return previous.member_id
        return None

    def _protocols_fit(self, join: _Join, others: list[MemberMetadata]) -> bool:
        """The joiner's protocol type is the group's, and it shares a protocol with the other
        members (always, when it is alone)."""
        g = self._group
        if not others:
            return True
        if g.protocol_type is not None and join.request.protocol_type != g.protocol_type:
            return False
        return bool(g.candidate_protocols(others) & {n for n, _ in join.protocols})

    def _join_new_member(self, join: _Join) -> tuple[list[GroupRecord], JoinResponse]:
        """A member id the group does not know: added, starting a rebalance unless one is
        being prepared (Kafka's ``classicGroupJoinNewMember``)."""
        g = self._group
        size = self.config.max_group_size
        if size is not None and len(g.members) >= size:
            return [], JoinResponse(E.GROUP_MAX_SIZE_REACHED, join.request.member_id)
        rebalance = g.state != S.PREPARING_REBALANCE
        return self._write_join(
            join, rebalance=rebalance, replaces=None, new_member=True, reason="member joined"
        )

    def _join_existing_member(
        self, join: _Join, existing: MemberMetadata
    ) -> tuple[list[GroupRecord], JoinResponse]:
        """A member's rejoin (Kafka's ``classicGroupJoinExistingMember``): a rebalance when
        its protocols or subscription changed, or it gave up partitions it held; otherwise
        (or while it already joined the rebalance under way) it is answered without a
        record."""
        g, request = self._group, join.request
        changed = _metadata_changed(existing, join)
        released = request.owned is not None and not existing.held <= frozenset(
            TopicPartition(t, p) for t, p in request.owned
        )
        if g.state == S.PREPARING_REBALANCE:
            if existing.joined and not changed and not released:
                return [], self._join_response(g, request.member_id)
            rebalance = False
        else:
            rebalance = changed or released
            if not rebalance:
                return [], self._join_response(g, request.member_id)
        return self._write_join(
            join,
            rebalance=rebalance,
            replaces=None,
            new_member=False,
            reason="member metadata changed",
        )

    def _join_static_member(
        self, join: _Join, replaces: str
    ) -> tuple[list[GroupRecord], JoinResponse]:
        """A static member's new incarnation (KIP-345; also a restarted query naming its
        previous incarnation): it takes the old member's place and partitions, and the old
        id is fenced. A rebalance only where Kafka's static join starts one: in Stable when
        the metadata changed or the old member led (the leader must learn the new id), in
        CompletingRebalance when the metadata changed, and in an Empty group."""
        g = self._group
        changed = _metadata_changed(g.members[replaces], join)
        if g.state == S.STABLE:
            rebalance = changed or replaces == g.leader
        elif g.state == S.COMPLETING_REBALANCE:
            rebalance = changed
        else:
            rebalance = g.state == S.EMPTY
        static = join.request.instance_id is not None
        return self._write_join(
            join,
            rebalance=rebalance,
            replaces=replaces,
            new_member=False,
            reason="static member rejoined" if static else "restarted member rejoined",
        )

    def _write_join(
        self,
        join: _Join,
        *,
        rebalance: bool,
        replaces: str | None,
        new_member: bool,
        reason: str,
    ) -> tuple[list[GroupRecord], JoinResponse]:
        """The JOIN record of any path, and the GENERATION record if it completes the join
        phase."""
        g, request, now_ms = self._group, join.request, join.now_ms
        payload = JoinPayload(
            client_id=request.client_id,
            client_host=request.client_host,
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=join.protocols,
            subscription=join.subscription,
            owned=self._owned_at_join(request, rebalance=rebalance, replacing=replaces is not None),
            replaces=replaces,
            rebalance=rebalance,
            features=frozenset(request.features),
            join_delay_until_ms=self._join_delay_until(g, g.state, new_member, request, now_ms),
            reason=request.reason or reason,
        )
        scratch = Scratch(g)
        scratch.add(
            join_record(
                now_ms=now_ms,
                member_id=request.member_id,
                instance_id=request.instance_id,
                generation=g.generation,
                payload=payload,
            )
        )
        seen = _sightings(join.seen, now_ms)
        self._maybe_complete_join(scratch, now_ms, seen, writer=request.member_id)
        return scratch.records, self._join_response(scratch.group, request.member_id)

    def _owned_at_join(
        self, request: JoinRequest, *, rebalance: bool, replacing: bool
    ) -> frozenset[TopicPartition] | None:
        """What the joiner keeps of what it holds (None: everything)."""
        joining_rebalance = rebalance or self._group.state == S.PREPARING_REBALANCE
        if joining_rebalance and self.rebalance_protocol() is RebalanceProtocol.EAGER:
            return frozenset()  # the eager protocol: a member gives up everything on rejoining
        if replacing or request.owned is None:
            return None
        return frozenset(TopicPartition(t, int(p)) for t, p in request.owned)

    def _join_delay_until(
        self,
        g: GroupMetadata,
        state: GroupState,
        new_member: bool,
        request: JoinRequest,
        now_ms: int,
    ) -> int | None:
        """When the join phase may complete at the earliest, if this join sets or extends the
        initial rebalance delay: the first join of an empty group sets it, and each new member
        joining within it extends it, up to the rebalance deadline (Kafka's InitialDelayedJoin).
        On the joiner's clock, counted from its JOIN record: the delay restarts there, and
        whoever completes the join caps it at the rebalance deadline (``clocks``)."""
        delay = self.config.initial_rebalance_delay_ms
        if delay <= 0:
            return None
        if state == S.EMPTY:
            return now_ms + min(delay, request.rebalance_timeout_ms)
        if state == S.PREPARING_REBALANCE and new_member and g.join_delay_until_ms is not None:
            return now_ms + delay
        return None

    def _join_response(self, g: GroupMetadata, mid: str) -> JoinResponse:
        m = g.members[mid]
        if g.state == S.PREPARING_REBALANCE:
            return JoinResponse(E.NONE, mid, pending=True)
        return (
            JoinResponse(
                E.NONE,
                mid,
                generation=g.generation,
                protocol=g.protocol,
                leader=g.leader,
                members=tuple(g.members) if g.leader == mid else (),
            )
            if m.generation == g.generation
            else JoinResponse(E.NONE, mid, pending=True)
        )

    def _maybe_complete_join(
        self, scratch: Scratch, now_ms: int, seen: Sightings, writer: str | None
    ) -> None:
        """If every member has rejoined (and the initial delay is over), write the next
        generation. Decided on one clock, the decider's (``seen``); ``now_ms`` only stamps the
        record, whose sync deadline the record factory writes relative to that stamp."""
        s = scratch.group
        if s.state != S.PREPARING_REBALANCE or not s.all_joined():
            return
        delay_end = join_delay_end_ms(s, seen)
        if delay_end is not None and seen.now_ms < delay_end:
            return  # the initial delay: more members may be on their way
        order = [mid for mid in s.join_order if mid in s.members]
        order += [mid for mid in s.members if mid not in order]
        leader = s.leader if s.leader in s.members else (order[0] if order else None)
        if leader is not None:
            order.remove(leader)
            order.insert(0, leader)
        members = [s.members[mid] for mid in order]
        protocol = s.select_protocol(members)
        assignor = self.config.assignors.get(protocol) if protocol else None
        cooperative = assignor is not None and (
            assignor.rebalance_protocol is RebalanceProtocol.COOPERATIVE
        )
        payload = GenerationPayload(
            leader=leader,
            protocol=protocol,
            members=tuple(order),
            deadline_ms=None,
            rejoin_implicitly=cooperative and s.all_have(IMPLICIT_REJOIN),
        )
        scratch.add(
            generation_record(
                now_ms=now_ms,
                writer=writer,
                generation=s.generation + 1,
                payload=payload,
                deadline_after_ms=s.max_rebalance_timeout_ms() if members else None,
            )
        )

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
        payload = sync_payload(g, assignor, snapshot, now_ms, _sightings(seen, now_ms))
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
            assignment=tuple(sorted(m.assignment)),
            revoking=tuple(sorted(m.revoking)),
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
        self._maybe_complete_join(scratch, now_ms, _sightings(seen, now_ms), writer=None)
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
        released = tuple(sorted(RevokePayload.of(record).partitions))
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
        seen = _sightings(seen, now_ms)
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
            if waiting and LEASES not in m.features:
                # Awaiting join / sync keeps a member alive (as in Kafka, whose members do
                # not heartbeat while a JoinGroup is pending). A member on a lease keeps
                # renewing it meanwhile, and may have "rejoined" implicitly while dead.
                continue
            if silent_past_session(m, seen):
                scratch.add(self._expire(m, now_ms, "session_timeout"))
        if self._past_deadline(scratch.group, seen, S.PREPARING_REBALANCE):
            for m in [m for m in scratch.group.members.values() if not m.joined]:
                scratch.add(self._expire(m, now_ms, "rebalance_timeout"))
        self._maybe_complete_join(scratch, now_ms, seen, writer=None)
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
                    client_id=m.client_id,
                    client_host=m.client_host,
                    generation=m.generation,
                    assignment=tuple(sorted(m.assignment)),
                    revoking=tuple(sorted(m.revoking)),
                    session_timeout_ms=m.session_timeout_ms,
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
            assignment=tuple(sorted(m.assignment)) if m else (),
            revoking=tuple(sorted(m.revoking)) if m else (),
            delay_ms=g.delay_ms,
            protocol=g.protocol,
            gives_up_at_join=m is not None
            and preparing
            and not m.joined
            and bool(m.assignment or m.revoking)
            and self.rebalance_protocol() is RebalanceProtocol.EAGER,
        )
