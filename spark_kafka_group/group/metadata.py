"""Group and member metadata: the state that replaying the group log builds.

Only :mod:`spark_kafka_group.group.replay` changes these objects. Everything here converts to
and from JSON-serialisable primitives (:meth:`GroupMetadata.to_payload`) for SNAPSHOT records.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from spark_kafka_group.group import defaults
from spark_kafka_group.group.state import GroupState


def partition_name(topic: str, partition: int) -> str:
    """A partition as Kafka's tools and its ``TopicPartition.toString`` print it:
    ``topic-partition``. Every message and label that names a partition uses this."""
    return f"{topic}-{partition}"


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return partition_name(self.topic, self.partition)


#: A member's partitions (its assignment, what it revokes, owns or releases), and any other
#: set of partitions: one shape in every message, record and view; sorted only where it is
#: printed or written as JSON (:func:`tp_list`).
Partitions = frozenset[TopicPartition]


def tp_list(partitions: Iterable[TopicPartition]) -> list[list[Any]]:
    """Partitions as sorted ``[[topic, partition], ...]`` (the JSON form)."""
    return [[t, p] for t, p in sorted(partitions)]


def tp_set(items: Iterable[Iterable[Any]] | None) -> Partitions:
    """The inverse of :func:`tp_list`."""
    if not items:
        return frozenset()
    return frozenset(TopicPartition(str(t), int(p)) for t, p in items)


#: A member renews a lease outside the log instead of writing HEARTBEAT records.
LEASES = "leases"
#: A member of a cooperative generation counts as rejoined at the next rebalance.
IMPLICIT_REJOIN = "implicit-rejoin"
FEATURES = (LEASES, IMPLICIT_REJOIN)


@dataclass(frozen=True)
class Subscription:
    """Explicit topics and/or a regular expression matched (fully) against topic names."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", tuple(sorted(set(self.topics))))

    def matches(self, topic: str) -> bool:
        if topic in self.topics:
            return True
        return self.pattern is not None and re.fullmatch(self.pattern, topic) is not None

    def resolve(self, snapshot: Mapping[str, int]) -> frozenset[str]:
        """The subscribed topics that exist in ``snapshot`` (topic -> partition count)."""
        found = {t for t in self.topics if t in snapshot}
        if self.pattern is not None:
            rx = re.compile(self.pattern)
            found.update(t for t in snapshot if rx.fullmatch(t))
        return frozenset(found)


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    metadata: str | None = None
    commit_timestamp_ms: int = 0
    generation: int = -1
    member_id: str | None = None


@dataclass(frozen=True)
class Opened:
    """The record that opened a window: its place in the fold (``GroupMetadata.seq`` after
    it) and its writer's timestamp. A window's length is its end, as that writer wrote it,
    minus ``written_ms``: both on one clock (see :mod:`spark_kafka_group.group.clocks`)."""

    seq: int = 0
    written_ms: int = 0

    def to_payload(self) -> list[int]:
        return [self.seq, self.written_ms]

    @classmethod
    def from_payload(cls, d: Any, default: Opened) -> Opened:
        return default if d is None else cls(int(d[0]), int(d[1]))


@dataclass(frozen=True)
class ScheduledDelay:
    """Partitions of a departed static member held back until ``until_ms`` (KIP-415), on the
    clock of the record that ``opened`` the delay."""

    partitions: Partitions
    until_ms: int
    opened: Opened = Opened()


def held_since_after(
    before: Mapping[TopicPartition, int], held: Iterable[TopicPartition], generation: int
) -> dict[TopicPartition, int]:
    """Since which generation each of ``held`` is held without interruption: as ``before``
    says, and a partition ``before`` does not name since ``generation``. The one place this is
    computed: the member's holdings take the group's record (``member/holdings.py``)."""
    return {tp: before.get(tp, generation) for tp in held}


@dataclass(frozen=True)
class MemberProfile:
    """What a member says of itself when it joins (JoinGroup's fields but its ids and what it
    owns): the one record of them. The join handler derives it from the request
    (``JoinRequest``) once it passes its checks, the JOIN record carries it (``JoinPayload``)
    and the group's member keeps it (``MemberMetadata.profile``), replaced whole at every join.
    """

    session_timeout_ms: int = defaults.SESSION_TIMEOUT_MS
    rebalance_timeout_ms: int = defaults.REBALANCE_TIMEOUT_MS
    protocol_type: str = "consumer"
    #: (assignor name, free-form JSON metadata) in the member's order of preference.
    protocols: tuple[tuple[str, Any], ...] = ()
    subscription: Subscription = Subscription()
    client_id: str = ""
    client_host: str = ""
    #: What its release can do beyond the classic protocol (see :data:`FEATURES`).
    features: frozenset[str] = frozenset()

    @property
    def protocol_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)

    def to_payload(self) -> dict[str, Any]:
        """Its JSON form, flat in a JOIN record's payload and a snapshot's member."""
        return {
            "client_id": self.client_id,
            "client_host": self.client_host,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "protocol_type": self.protocol_type,
            "protocols": [[name, md] for name, md in self.protocols],
            "topics": list(self.subscription.topics),
            "pattern": self.subscription.pattern,
            # left out while empty: the releases before features did not write it
            **({"features": sorted(self.features)} if self.features else {}),
        }

    @classmethod
    def from_payload(cls, d: Mapping[str, Any]) -> MemberProfile:
        return cls(
            session_timeout_ms=int(d["session_timeout_ms"]),
            rebalance_timeout_ms=int(d["rebalance_timeout_ms"]),
            protocol_type=str(d["protocol_type"]),
            protocols=tuple((str(name), md) for name, md in d["protocols"]),
            subscription=Subscription(tuple(d.get("topics") or ()), d.get("pattern")),
            client_id=str(d.get("client_id", "")),
            client_host=str(d.get("client_host", "")),
            features=frozenset(str(f) for f in d.get("features", ())),
        )


@dataclass
class MemberMetadata:
    """One member of the group, as the fold keeps it: the one member record. Who it is
    (``member_id``, ``instance_id``), what it said when it joined (``profile``), and what it
    holds since when; the views of it (``MemberView``, the reader's ``Holdings``, a
    description) are derived from it."""

    member_id: str
    instance_id: str | None = None
    profile: MemberProfile = MemberProfile()
    #: The generation the member belongs to (0: not yet part of any).
    generation: int = 0
    #: Whether the member has (re)joined during the current PreparingRebalance.
    joined: bool = False
    #: Partitions the member may consume in its generation.
    assignment: Partitions = frozenset()
    #: Partitions the member still holds but must give up (pending revocation ack).
    revoking: Partitions = frozenset()
    #: For each held partition, the generation since which the member has held it without
    #: interruption: only a batch planned since then may commit it (see ``admin``).
    held_since: Mapping[TopicPartition, int] = field(default_factory=dict)
    #: The writer's timestamp of its newest record (shown to people, never compared).
    last_seen_ms: int = 0
    #: ``GroupMetadata.seq`` after its newest record (or a GENERATION / SYNC, which restart
    #: every session): what a member's liveness is judged by, on the observer's clock.
    last_seen_seq: int = 0
    #: The sequence number of the newest commit object folded into the log for this member,
    #: by the object's writer ("": the member's own; the progress listener's): an older
    #: object is never folded after it (``group.offsets.fold_commit_objects``). Replaced,
    #: never changed in place: copies share it.
    folded_seq: Mapping[str, int] = field(default_factory=dict)

    @property
    def held(self) -> Partitions:
        """Everything the member may still be consuming: its assignment and its revocations."""
        return self.assignment | self.revoking

    def hold(
        self,
        assignment: Iterable[TopicPartition],
        revoking: Iterable[TopicPartition],
        generation: int,
    ) -> None:
        """Set what the member holds; a partition it did not hold before counts from
        ``generation``. (``held_since`` is replaced, never changed in place: copies share it.)"""
        self.assignment = frozenset(assignment)
        self.revoking = frozenset(revoking)
        self.held_since = held_since_after(self.held_since, self.held, generation)

    def to_payload(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            **self.profile.to_payload(),
            "generation": self.generation,
            "joined": self.joined,
            "assignment": tp_list(self.assignment),
            "revoking": tp_list(self.revoking),
            "held_since": [[t, p, g] for (t, p), g in sorted(self.held_since.items())],
            "last_seen_ms": self.last_seen_ms,
            "last_seen_seq": self.last_seen_seq,
            # left out while empty: the snapshots written before folded objects were numbered
            **({"folded_seq": dict(sorted(self.folded_seq.items()))} if self.folded_seq else {}),
        }

    @classmethod
    def from_payload(cls, d: Mapping[str, Any]) -> MemberMetadata:
        generation = int(d["generation"])
        held = tp_set(d["assignment"]) | tp_set(d["revoking"])
        # Snapshots written before held_since existed: count from the member's generation
        # (the strictest choice: an older batch's commit is refused, as it was then).
        since = {TopicPartition(str(t), int(p)): int(g) for t, p, g in d.get("held_since", ())}
        return cls(
            member_id=d["member_id"],
            instance_id=d["instance_id"],
            profile=MemberProfile.from_payload(d),
            generation=generation,
            joined=bool(d["joined"]),
            assignment=tp_set(d["assignment"]),
            revoking=tp_set(d["revoking"]),
            held_since=held_since_after(since, held, generation),
            last_seen_ms=int(d["last_seen_ms"]),
            last_seen_seq=int(d.get("last_seen_seq", 0)),
            folded_seq={str(w): int(n) for w, n in d.get("folded_seq", {}).items()},
        )


@dataclass
class GroupMetadata:
    """The whole group: what every member folds from the log."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    #: Members in join order.
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    #: group.instance.id -> member id of its current incarnation.
    static_members: dict[str, str] = field(default_factory=dict)
    #: Member ids replaced by a newer incarnation -> the instance id they held ("" for a
    #: dynamic member replaced by its restarted query).
    fenced: dict[str, str] = field(default_factory=dict)
    #: Order in which members joined during the current rebalance.
    join_order: list[str] = field(default_factory=list)
    #: Records folded so far (a SNAPSHOT restores it): how windows and liveness name the
    #: record they count from (see :mod:`spark_kafka_group.group.clocks`).
    seq: int = 0
    #: PreparingRebalance: when laggards are dropped; CompletingRebalance: sync deadline
    #: (on the clock of the record that ``deadline_opened`` names).
    deadline_ms: int | None = None
    deadline_opened: Opened = Opened()
    #: The first rebalance of an empty group completes no earlier than this (Kafka's
    #: group.initial.rebalance.delay.ms), so that members starting together share it (on the
    #: clock of the record that ``join_delay_opened`` names).
    join_delay_until_ms: int | None = None
    join_delay_opened: Opened = Opened()
    #: Set by the generation: its protocol is cooperative, so the next rebalance needs no
    #: JOIN from members of this generation (see replay's _prepare_rebalance).
    rejoin_implicitly: bool = False
    rebalance_reason: str | None = None
    #: Topic -> partition count the leader's last assignment used (Kafka's
    #: ``ConsumerCoordinator.assignmentSnapshot``).
    assignment_snapshot: dict[str, int] | None = None
    #: The newest metadata any member reported (METADATA) or the leader used (SYNC).
    latest_metadata: dict[str, int] | None = None
    scheduled: dict[str, ScheduledDelay] = field(default_factory=dict)
    #: Remaining scheduled delay announced with the last assignment (0: none).
    delay_ms: int = 0
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    #: Newest record timestamp applied.
    last_record_ms: int = 0

    # ---------------------------------------------------------------- derived views

    def member(self, member_id: str | None) -> MemberMetadata | None:
        return self.members.get(member_id) if member_id is not None else None

    def holders(self) -> dict[TopicPartition, str]:
        """Partition -> the member holding it (assigned or still revoking)."""
        out: dict[TopicPartition, str] = {}
        for m in self.members.values():
            for tp in m.held:
                out[tp] = m.member_id
        return out

    def all_have(self, feature: str) -> bool:
        """Every member's release has ``feature``."""
        return all(feature in m.profile.features for m in self.members.values())

    def all_joined(self) -> bool:
        return all(m.joined for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.profile.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self, members: Iterable[MemberMetadata] | None = None) -> set[str]:
        """Protocols every given member (default: all) supports (Kafka's
        ``ClassicGroup.candidateProtocols``). A member joining a non-empty group must list one
        of its other members' candidates, or it is refused with INCONSISTENT_GROUP_PROTOCOL."""
        ms = list(self.members.values() if members is None else members)
        if not ms:
            return set()
        common = set(ms[0].profile.protocol_names)
        for m in ms[1:]:
            common &= set(m.profile.protocol_names)
        return common

    def select_protocol(self, members: Iterable[MemberMetadata]) -> str | None:
        """The group's protocol for a new generation (Kafka's ``ClassicGroup.selectProtocol``):
        among the protocols every member supports, each member votes for the one it prefers
        most; the most votes win, a tie goes to the first name in alphabetical order (Kafka
        leaves it to hash order). Computed when a generation completes, so it follows every
        change of membership; whether rebalances are eager or cooperative follows it too
        (KIP-429's upgrade: the group leaves an eager protocol only once every member lists
        the cooperative one)."""
        ms = list(members)
        candidates = self.candidate_protocols(ms)
        if not candidates:
            return None
        votes: dict[str, int] = {}
        for m in ms:
            choice = next(n for n in m.profile.protocol_names if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]

    def subscribed_topics(self, snapshot: Mapping[str, int]) -> frozenset[str]:
        """Topics of ``snapshot`` that any member subscribes to."""
        out: set[str] = set()
        for m in self.members.values():
            out |= m.profile.subscription.resolve(snapshot)
        return frozenset(out)

    def members_reading(self, topic: str) -> list[MemberMetadata]:
        """Members that subscribe to ``topic`` or still hold a partition of it (a member whose
        subscription just changed keeps its old partitions until the rebalance takes them):
        while there are any, the group's offsets of ``topic`` are in use (OffsetDelete's
        GROUP_SUBSCRIBED_TO_TOPIC)."""
        return [
            m
            for m in self.members.values()
            if m.profile.subscription.matches(topic) or any(tp.topic == topic for tp in m.held)
        ]

    def relevant_metadata(self, snapshot: Mapping[str, int]) -> dict[str, int]:
        topics = self.subscribed_topics(snapshot)
        return {t: int(snapshot[t]) for t in sorted(topics)}

    # ---------------------------------------------------------------- copies and JSON

    def copy(self) -> GroupMetadata:
        """A copy that replay can change without touching this one."""
        return replace(
            self,
            members={k: replace(v) for k, v in self.members.items()},
            static_members=dict(self.static_members),
            fenced=dict(self.fenced),
            join_order=list(self.join_order),
            assignment_snapshot=(
                None if self.assignment_snapshot is None else dict(self.assignment_snapshot)
            ),
            latest_metadata=None if self.latest_metadata is None else dict(self.latest_metadata),
            scheduled=dict(self.scheduled),
            offsets=dict(self.offsets),
        )

    def to_payload(self) -> dict[str, Any]:
        """The complete state as JSON-serialisable primitives."""
        return {
            "group_id": self.group_id,
            "state": self.state.value,
            "generation": self.generation,
            "protocol_type": self.protocol_type,
            "protocol": self.protocol,
            "leader": self.leader,
            "members": [m.to_payload() for m in self.members.values()],
            "static_members": dict(self.static_members),
            "fenced": dict(self.fenced),
            "join_order": list(self.join_order),
            "seq": self.seq,
            "deadline_ms": self.deadline_ms,
            "deadline_opened": self.deadline_opened.to_payload(),
            "join_delay_until_ms": self.join_delay_until_ms,
            "join_delay_opened": self.join_delay_opened.to_payload(),
            "rejoin_implicitly": self.rejoin_implicitly,
            "rebalance_reason": self.rebalance_reason,
            "assignment_snapshot": self.assignment_snapshot,
            "latest_metadata": self.latest_metadata,
            "scheduled": scheduled_to_payload(self.scheduled, opened=True),
            "delay_ms": self.delay_ms,
            "offsets": [
                [tp.topic, tp.partition, o.offset, o.metadata, o.commit_timestamp_ms,
                 o.generation, o.member_id]
                for tp, o in sorted(self.offsets.items())
            ],
            "last_record_ms": self.last_record_ms,
        }  # fmt: skip

    @classmethod
    def from_payload(cls, d: Mapping[str, Any]) -> GroupMetadata:
        members = [MemberMetadata.from_payload(m) for m in d["members"]]
        # A snapshot written before windows named their opening record: count them from the
        # snapshot's newest record (its writer's clock), read as durations from there.
        seq = int(d.get("seq", 0))
        here = Opened(seq, int(d["last_record_ms"]))
        return cls(
            group_id=d["group_id"],
            state=GroupState(d["state"]),
            generation=int(d["generation"]),
            protocol_type=d["protocol_type"],
            protocol=d["protocol"],
            leader=d["leader"],
            members={m.member_id: m for m in members},
            static_members=dict(d["static_members"]),
            fenced=dict(d["fenced"]),
            join_order=list(d["join_order"]),
            seq=seq,
            deadline_ms=d["deadline_ms"],
            deadline_opened=Opened.from_payload(d.get("deadline_opened"), here),
            join_delay_until_ms=d.get("join_delay_until_ms"),
            join_delay_opened=Opened.from_payload(d.get("join_delay_opened"), here),
            rejoin_implicitly=bool(d.get("rejoin_implicitly", False)),
            rebalance_reason=d["rebalance_reason"],
            assignment_snapshot=_counts(d["assignment_snapshot"]),
            latest_metadata=_counts(d["latest_metadata"]),
            scheduled=scheduled_from_payload(d["scheduled"], here),
            delay_ms=int(d["delay_ms"]),
            offsets={
                TopicPartition(t, int(p)): OffsetAndMetadata(int(o), md, int(ts), int(g), mid)
                for t, p, o, md, ts, g, mid in d["offsets"]
            },
            last_record_ms=int(d["last_record_ms"]),
        )


def _counts(d: Mapping[str, Any] | None) -> dict[str, int] | None:
    return None if d is None else {str(k): int(v) for k, v in d.items()}


def scheduled_from_payload(
    d: Mapping[str, Any] | None, opened: Opened = Opened()
) -> dict[str, ScheduledDelay]:
    """Scheduled delays as a SYNC or SNAPSHOT payload holds them (``opened``: the record they
    count from, unless the payload names it)."""
    return {
        inst: ScheduledDelay(
            tp_set(s["partitions"]),
            int(s["until_ms"]),
            Opened.from_payload(s.get("opened"), opened),
        )
        for inst, s in (d or {}).items()
    }


def scheduled_to_payload(s: Mapping[str, ScheduledDelay], *, opened: bool) -> dict[str, Any]:
    """Scheduled delays as a SYNC or SNAPSHOT payload holds them: :func:`scheduled_from_payload`
    reads both. A SNAPSHOT names the record that opened each delay (``opened=True``); a SYNC
    opens its delays itself, so it leaves ``opened`` out (as every SYNC written so far)."""
    payload: dict[str, Any] = {}
    for inst, v in sorted(s.items()):
        payload[inst] = {"partitions": tp_list(v.partitions), "until_ms": v.until_ms}
        if opened:
            payload[inst]["opened"] = v.opened.to_payload()
    return payload
