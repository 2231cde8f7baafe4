"""The member's holdings take since when each partition is held from the group's record
(``MemberMetadata.held_since``), computed once by the fold; the book lowers it only where a
restarted query resumes its checkpoint, and only while the group's record stays."""

from __future__ import annotations

from spark_kafka_group.group import GroupMetadata, GroupState, TopicPartition
from spark_kafka_group.group.messages import MemberView
from spark_kafka_group.group.metadata import MemberMetadata
from spark_kafka_group.member.holdings import HoldingsBook
from spark_kafka_group.member.listener import RebalanceListenerRunner

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


class Member:
    """Member "m" of a group, its record kept as the fold keeps it, and its holdings book."""

    def __init__(self) -> None:
        self.group = GroupMetadata("g", state=GroupState.STABLE)
        self.group.members["m"] = MemberMetadata("m")
        self.book = HoldingsBook("m", RebalanceListenerRunner(None), "g")

    def step(self, generation: int, held: set[TopicPartition]) -> dict[TopicPartition, int]:
        """A step in ``generation`` after which the member holds ``held``: the group's record
        of since when, and the book's holdings published from it."""
        record = self.group.members["m"]
        record.generation = self.group.generation = generation
        record.hold(held, (), generation)
        view = MemberView(
            member_id="m", state=GroupState.STABLE, group_generation=generation, known=True,
            fenced=False, needs_join=False, awaiting_join=False, awaiting_sync=False,
            is_leader=True, member_generation=generation, assignment=frozenset(held),
            revoking=frozenset(), delay_ms=0, protocol="range",
        )  # fmt: skip
        self.book.update(view, self.group)
        return dict(record.held_since)

    @property
    def held_since(self) -> dict[TopicPartition, int]:
        return dict(self.book.holdings.held_since)


def test_the_holdings_take_the_groups_record_of_since_when() -> None:
    m = Member()
    m.step(3, {A})
    assert m.step(5, {A, B}) == m.held_since == {A: 3, B: 5}


def test_a_resumed_checkpoint_lowers_it_while_the_groups_record_stays() -> None:
    m = Member()
    m.step(4, {A, B})
    assert m.book.resume_checkpoint("m-before", 2, {A: 10, B: 20}, committed={}) == {A, B}
    assert m.held_since == {A: 2, B: 2}
    m.step(5, {A, B})  # held throughout: the resumption stands
    assert m.held_since == {A: 2, B: 2}
    m.step(6, {A})  # B moved away
    m.step(7, {A, B})  # and came back: held since 7, whatever the checkpoint said
    assert m.held_since == {A: 2, B: 7}


def test_a_reset_forgets_the_resumption() -> None:
    m = Member()
    m.step(4, {A})
    m.book.resume_checkpoint("m-before", 2, {A: 10}, committed={})
    m.book.reset("m")
    m.step(4, {A})
    assert m.held_since == {A: 4}


def test_a_partition_given_up_and_held_again_between_two_steps_counts_from_its_return() -> None:
    m = Member()
    m.step(4, {A})
    # An eager rebalance within one step: the JOIN gives A up, the SYNC gives it back.
    m.group.members["m"].hold((), (), 5)
    assert m.step(6, {A}) == m.held_since == {A: 6}  # the batches of generation 4 are fenced
