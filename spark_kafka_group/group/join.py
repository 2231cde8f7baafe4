"""JoinGroup, as Kafka's ``GroupMetadataManager`` splits the classic join: after the request's
own checks, a join takes one of three paths (a new member's, an existing member's, or a static
member's new incarnation, which replaces the old member in place), and the last join of a
rebalance completes the join phase (the next generation). Pure, as every handler: the folded
group and the request in, ``(records, response)`` out (:mod:`.handling`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from spark_kafka_group.group.assignors import RebalanceProtocol
from spark_kafka_group.group.clocks import Sightings, join_delay_end_ms
from spark_kafka_group.group.config import GroupConfig
from spark_kafka_group.group.errors import GroupError
from spark_kafka_group.group.handling import Scratch, sightings, unavailable
from spark_kafka_group.group.messages import JoinRequest, JoinResponse
from spark_kafka_group.group.metadata import (
    IMPLICIT_REJOIN,
    GroupMetadata,
    MemberMetadata,
    MemberProfile,
    Partitions,
    Subscription,
    TopicPartition,
)
from spark_kafka_group.group.payloads import GenerationPayload, JoinPayload
from spark_kafka_group.group.record_helpers import generation_record, join_record
from spark_kafka_group.group.records import GroupRecord
from spark_kafka_group.group.state import GroupState

S = GroupState
E = GroupError


@dataclass(frozen=True)
class _Join:
    """A JoinGroup request that passed its own checks, on its way down one join path."""

    request: JoinRequest
    #: What the member says of itself, derived from the request (its protocols' metadata in
    #: canonical JSON form, so that live and replayed states compare equal).
    profile: MemberProfile
    now_ms: int
    seen: Sightings | None


def _metadata_changed(previous: MemberMetadata, join: _Join) -> bool:
    """The joiner's protocols or subscription differ from the member it rejoins as."""
    before, now = previous.profile, join.profile
    return before.protocols != now.protocols or before.subscription != now.subscription


class ClassicJoin:
    """The join handlers over one folded group and its configuration."""

    def __init__(self, group: GroupMetadata, config: GroupConfig) -> None:
        self._group = group
        self.config = config

    def rebalance_protocol(self) -> RebalanceProtocol | None:
        """Eager or cooperative, for the group's current protocol (None: no protocol yet)."""
        protocol = self._group.protocol
        if protocol is None:
            return None
        assignor = self.config.assignors.get(protocol)
        return assignor.rebalance_protocol if assignor else RebalanceProtocol.EAGER

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

    def _check_join(self, request: JoinRequest) -> GroupError | MemberProfile:
        """The request's own checks; the member's profile if it passes."""
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
        return MemberProfile(
            session_timeout_ms=timeout,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=protocols,
            subscription=Subscription(tuple(request.topics), request.pattern),
            client_id=request.client_id,
            client_host=request.client_host,
            features=frozenset(request.features),
        )

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
        return bool(g.candidate_protocols(others) & set(join.profile.protocol_names))

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
            profile=join.profile,
            owned=self._owned_at_join(request, rebalance=rebalance, replaces=replaces),
            replaces=replaces,
            rebalance=rebalance,
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
        seen = sightings(join.seen, now_ms)
        self.maybe_complete(scratch, now_ms, seen, writer=request.member_id)
        return scratch.records, self._join_response(scratch.group, request.member_id)

    def _owned_at_join(
        self, request: JoinRequest, *, rebalance: bool, replaces: str | None
    ) -> Partitions | None:
        """What the joiner keeps of what it holds (None: everything)."""
        joining_rebalance = rebalance or self._group.state == S.PREPARING_REBALANCE
        if joining_rebalance and self.rebalance_protocol() is RebalanceProtocol.EAGER:
            return frozenset()  # the eager protocol: a member gives up everything on rejoining
        if replaces is not None or request.owned is None:
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

    def maybe_complete(
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
