"""``assign``: a fixed set of partitions, without group management (Kafka's ``assign()``).

As with a Kafka consumer that uses ``assign()`` and commits to a group, the query does not
join the group: it owns exactly the listed partitions and commits as a "simple" group member,
which the protocol accepts only while the group has no members (Kafka: commits with
generation -1 to an Empty group); a commit while it has some fails the query with
:class:`CommitRejectedError` naming them. Several ``assign`` queries may share a group id; nothing
then stops them from reading the same partitions, exactly as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from spark_kafka_group.errors import CommitRejectedError
from spark_kafka_group.group import GroupCoordinator, GroupError, GroupRecord
from spark_kafka_group.group.metadata import MemberMetadata, Partitions, TopicPartition
from spark_kafka_group.group.offsets import simple_commit
from spark_kafka_group.member.in_flight import BatchesInFlight, PlannedBatch
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.member.member import new_member_id
from spark_kafka_group.member.view import Holdings
from spark_kafka_group.options import GroupSettings

log = logging.getLogger(__name__)


class FixedAssignmentMember:
    def __init__(self, settings: GroupSettings, partitions: Iterable[TopicPartition]) -> None:
        self.settings = settings
        self.member_id = f"assign-{new_member_id()}"
        self._client = GroupLogClient(
            settings.store, settings.group_id, storage_options=settings.storage_options
        )
        held = frozenset(partitions)
        self._holdings = Holdings(
            generation=0,
            member_id=self.member_id,
            held=held,
            held_since=dict.fromkeys(held, 0),
            stable=True,
        )
        self._in_flight = BatchesInFlight()
        self.on_durable: Callable[[dict[TopicPartition, int]], None] | None = None

    def start(self, *, replaces: str | None = None, must_complete_join: bool = False) -> Holdings:
        """Nothing to join: the partitions are fixed (the arguments are the group member's)."""
        self._client.fold()
        return self._holdings

    def poll(self) -> Holdings:
        return self._holdings

    def current_holdings(self) -> Holdings:
        return self._holdings

    def group_metadata(self) -> Mapping[str, int] | None:
        """An ``assign`` query has no subscription to discover partitions in."""
        return None

    @property
    def holdings(self) -> Holdings:
        return self._holdings

    def resume_checkpoint(
        self, previous_member: str, generation: int, positions: Mapping[TopicPartition, int]
    ) -> Partitions:
        """Fixed partitions are always ours: the checkpointed positions stay."""
        return frozenset(tp for tp in positions if tp in self._holdings.held)

    def begin_batch(
        self, ends: Mapping[TopicPartition, int], *, batch_generation: int
    ) -> Partitions:
        """Fixed partitions are always ours (nothing is ever revoked)."""
        ours = frozenset(tp for tp in ends if tp in self._holdings.held)
        batch = PlannedBatch({tp: ends[tp] for tp in ours}, batch_generation, self.member_id)
        self._in_flight = self._in_flight.begin(batch)
        return ours

    @property
    def in_flight(self) -> BatchesInFlight:
        """The batches handed to Spark (nothing waits for their commits: nothing is ever
        revoked)."""
        return self._in_flight

    def committed_offsets(self) -> dict[TopicPartition, int]:
        offsets = self._client.fold().group.offsets
        return {tp: o.offset for tp, o in offsets.items()}

    def group_members(self) -> frozenset[str]:
        return frozenset(self._client.fold().group.members)

    def commit(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        batch_generation: int,
        batch_member: str,
        release: Iterable[TopicPartition] = (),
    ) -> Holdings:
        mine = {tp: o for tp, o in offsets.items() if tp in self._holdings.held}

        written: dict[TopicPartition, int] = {}

        def decide(
            work: GroupCoordinator, now: int
        ) -> tuple[list[GroupRecord], tuple[GroupError, list[str]]]:
            records, response = simple_commit(work.group, mine, now)
            written.clear()
            if response is None:
                return [], (GroupError.NONE, [])
            written.update({tp: mine[tp] for tp in response.accepted})
            members = [_describe_member(m) for m in work.group.members.values()]
            return records, (response.error, sorted(members))

        error, members = self._client.transact(decide)
        if error is GroupError.NONE and written and self.on_durable is not None:
            self.on_durable(dict(written))
        if error is not GroupError.NONE:
            group = self.settings.group_id
            if members:
                raise CommitRejectedError(
                    f"Group {group!r} rejected the commit of this 'assign' query: the group has "
                    f"subscribing members ({'; '.join(members)}), and as in Kafka a consumer "
                    "that is not a member (assign) may commit only while the group has none. "
                    "Stop those queries, use 'subscribe' in every query of the group, or give "
                    "this query another groupId."
                )
            raise CommitRejectedError(
                f"Group {group!r} rejected the commit of this 'assign' query ({error.name}). "
                "Retry the query, or give it another groupId."
            )
        return self._holdings

    def leave(self) -> None:
        """Nothing to leave: an ``assign`` query is not a group member."""

    def close(self) -> None:
        """Nothing to stop."""


def _describe_member(member: MemberMetadata) -> str:
    """A member as an operator finds it: its id, host, instance id and subscription."""
    sub = member.profile.subscription
    what = ", ".join([*sub.topics, *([f"pattern {sub.pattern}"] if sub.pattern else [])])
    where = f" on {member.profile.client_host}" if member.profile.client_host else ""
    static = f", groupInstanceId {member.instance_id}" if member.instance_id else ""
    return f"{member.member_id}{where}{static}, subscribing to {what or 'nothing'}"
