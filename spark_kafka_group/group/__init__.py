"""The consumer-group protocol: Kafka's group coordinator as a pure, replayable state machine.

There is no broker process. Every member (a streaming query) runs this same code over the
shared group log: it folds the log into a :class:`GroupMetadata` (``replay.apply``, the only
code that changes state), calls a handler of :class:`GroupCoordinator` with its request and
``now_ms``, appends the returned :class:`GroupRecord` list with compare-and-swap, and folds
them. Handlers never mutate; replay reads only record data, never a clock or local config.

How a member drives it (one poll, every heartbeat interval, sooner while rebalancing)::

    coord.apply_all(new_records_since_last_fold)        # 1. fold up to log version N
    work = coord.fork()                                 # 2. decide on a copy
    records = work.tick(now, seen)                      #    expiries, deadlines: anyone may
    work.apply_all(records)
    view = work.member_view(me)                         # 3. what to do
    if view.fenced: stop (FENCED_INSTANCE_ID is fatal)
    elif view.needs_join:      recs, r = work.join(JoinRequest(me, ..., owned=held), now)
                               # eager protocol: commit final offsets of everything first
    elif view.awaiting_join:   recs, r = work.heartbeat(me, gen, now)  # wait for the others
    elif view.awaiting_sync:   recs, r = work.sync(me, gen, now, metadata=topic_counts)
                               # the leader writes the assignment; the others get pending
    else:                      # Stable
        recs, r = work.sync(me, gen, now)          # read assignment / revoking / delay_ms
        offsets.commit_offsets(work.group, me, gen, offsets, now)  # zombies: ILLEGAL_GENERATION
        for revoked partitions: finish the batch, commit its end, then
            work.ack_revocation(me, gen, partitions, now)
        work.metadata_changed(me, topic_counts, now) # partition counts / pattern matches
        work.heartbeat(me, gen, now)                 # REBALANCE_IN_PROGRESS -> rejoin
    append(records + recs, expected_version=N)         # 4. CAS; on conflict go to 1
    coord.apply_all(records + recs)

``seen``: what this process saw and when, on its own clock (:mod:`.clocks`); ``join``,
``leave`` and ``sync`` take it too. Time is judged only through it: no decision compares a
time another machine wrote with this machine's clock.

``gen`` is the group generation from the join response (``view.group_generation`` once the
member is in it). A rejoin while waiting is harmless (no record), so a member may simply call
``join`` until the response is no longer ``pending``. ``snapshot_record(now)`` writes the
whole state; replay may start at the latest SNAPSHOT record.

Record kinds: :class:`~spark_kafka_group.group.kinds.RecordKind`; their payloads:
:mod:`~spark_kafka_group.group.payloads`; the factories that build them:
:mod:`~spark_kafka_group.group.record_helpers`.
"""

from __future__ import annotations

from spark_kafka_group.group.assignors import (
    Assignor,
    CooperativeStickyAssignor,
    MemberSubscription,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
)
from spark_kafka_group.group.config import GroupConfig
from spark_kafka_group.group.coordinator import GroupCoordinator
from spark_kafka_group.group.description import GroupDescription, MemberDescription
from spark_kafka_group.group.errors import (
    GroupError,
    GroupProtocolBug,
    IllegalStateTransitionError,
)
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.messages import (
    CommitResponse,
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
    GroupMetadata,
    MemberMetadata,
    MemberProfile,
    OffsetAndMetadata,
    Partitions,
    Subscription,
    TopicPartition,
)
from spark_kafka_group.group.records import RECORD_SCHEMA_VERSION, GroupRecord
from spark_kafka_group.group.replay import apply, latest_snapshot_index, replay
from spark_kafka_group.group.state import GroupState
from spark_kafka_group.group.timer import Clock, ManualClock, SystemClock

__all__ = [
    "RECORD_SCHEMA_VERSION",
    "Assignor",
    "Clock",
    "CommitResponse",
    "CooperativeStickyAssignor",
    "GroupConfig",
    "GroupCoordinator",
    "GroupDescription",
    "GroupError",
    "GroupMetadata",
    "GroupProtocolBug",
    "GroupRecord",
    "GroupState",
    "HeartbeatResponse",
    "IllegalStateTransitionError",
    "JoinRequest",
    "JoinResponse",
    "LeaveResponse",
    "ManualClock",
    "MemberDescription",
    "MemberMetadata",
    "MemberProfile",
    "MemberSubscription",
    "MemberView",
    "MetadataResponse",
    "OffsetAndMetadata",
    "Partitions",
    "RangeAssignor",
    "RebalanceProtocol",
    "RecordKind",
    "RevokeResponse",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "SyncResponse",
    "SystemClock",
    "TopicPartition",
    "apply",
    "latest_snapshot_index",
    "replay",
]
