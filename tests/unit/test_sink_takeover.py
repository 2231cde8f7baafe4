"""The takeover rules for queries writing through Spark's own Delta sink (sink/takeover.py): from
a dead member's plans, its listener's newest completed batch and the query's transaction version
in the table, its new owner starts exactly at the end of what landed, neither before (a record
written twice) nor after (a record lost)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, Transaction, write_deltalake
from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.sink.spark_delta import SinkBatches, record_completed
from spark_kafka_group.sink.takeover import (
    PLANS_KEPT,
    BatchEnd,
    CompletedBatch,
    Found,
    LandedRange,
    PlannedBatch,
    Superseded,
    Unresolved,
    decode_completed,
    decode_plans,
    encode_completed,
    encode_plans,
    landed_ranges,
    spent,
    take_over,
)
from spark_kafka_group.store.sink_batches import SinkBatchFiles

A, B, C = (TopicPartition("t", p) for p in range(3))


def resolved(ranges: dict[TopicPartition, LandedRange] | Unresolved):
    assert not isinstance(ranges, Unresolved), ranges
    return ranges


def chain(
    initial: dict[TopicPartition, int],
    steps: list[dict[TopicPartition, int]],
    *,
    generation=1,
    member="m",
) -> list[PlannedBatch]:
    """Batches 0, 1, ... of ``member``: each adds ``steps[i]`` records to its partitions; a
    partition first seen in a step starts at offset 0."""
    plans = []
    after = BatchEnd(-1, "", {})
    offsets = dict(initial)
    for i, step in enumerate(steps):
        # a partition not in the previous batch is new to it: it starts where it ended
        starts = {tp: offsets.get(tp, 0) for tp in step if tp not in after.offsets}
        if i == 0:
            starts = {**starts, **{tp: initial[tp] for tp in initial}}
        ends = {tp: offsets.get(tp, 0) + n for tp, n in step.items()}
        # generation moves with the batch number, so no two ends are equal
        end = BatchEnd(generation + i, member, ends)
        plans.append(PlannedBatch(after, end, starts))
        offsets.update(ends)
        after = end
    return plans


batches = st.lists(
    st.dictionaries(st.sampled_from([A, B, C]), st.integers(0, 50), min_size=1),
    min_size=1,
    max_size=24,
)


@given(steps=batches, data=st.data())
def test_a_new_owner_starts_exactly_at_the_end_of_what_landed(steps, data) -> None:
    """Any batches, any completed batch N the listener saw, any later batch V that landed, the
    member's newest plans kept: the partitions start at batch V's ends (the last batch of each
    partition up to V), or the rule says it cannot tell (never a wrong position)."""
    plans = chain({A: 5}, steps)
    completed_id = data.draw(st.integers(0, len(plans) - 1), label="completed batch")
    landed = data.draw(st.integers(completed_id, len(plans) - 1), label="landed batch")
    kept = plans[-PLANS_KEPT:]
    completed = CompletedBatch("q", completed_id, plans[completed_id].end)
    ranges = landed_ranges(completed, kept, landed)
    truth: dict[TopicPartition, int] = {}
    for plan in plans[: landed + 1]:
        truth.update(plan.end.offsets)
    if isinstance(ranges, Unresolved):
        # only when the kept plans do not reach back to the completed batch
        assert plans.index(kept[0]) > completed_id + 1
        return
    committed = dict(completed.end.offsets)  # the listener's commit of batch N
    moved = take_over(committed, [ranges])
    assert moved == {tp: truth[tp] for tp in committed}


@given(steps=batches, data=st.data())
def test_a_query_s_incarnations_are_one_chain(steps, data) -> None:
    """One query's batches planned by several of its incarnations (restarts on its checkpoint),
    their plans pooled from all their files in any order, some dying incarnations having
    planned a batch Spark never ran (before its offset log had it; the next incarnation
    planned that batch again): the new owner starts at the ends of the landed batch."""
    plans = chain({A: 5}, steps)
    restarts = [i for i in range(1, len(plans)) if data.draw(st.booleans(), label=f"restart {i}")]

    def planner(batch_id: int) -> str:
        """The incarnation that planned batch ``batch_id``: the last one started before it."""
        return f"m{max([0, *(r for r in restarts if r <= batch_id)])}"

    ran: list[PlannedBatch] = []
    for i, plan in enumerate(plans):
        after = ran[-1].end if ran else plan.after
        end = BatchEnd(plan.end.generation, planner(i), plan.end.offsets)
        ran.append(PlannedBatch(after, end, plan.starts))
    never_ran = [
        PlannedBatch(
            ran[r].after,
            BatchEnd(-r, planner(r - 1), {tp: o + 1000 for tp, o in ran[r].end.offsets.items()}),
        )
        for r in restarts
        if data.draw(st.booleans(), label=f"plan of batch {r} before the restart never ran")
    ]
    completed_id = data.draw(st.integers(0, len(ran) - 1), label="completed batch")
    landed = data.draw(st.integers(completed_id, len(ran) - 1), label="landed batch")
    completed = CompletedBatch("q", completed_id, ran[completed_id].end)
    pooled = data.draw(st.permutations([*ran, *never_ran]), label="pooled plans")
    ranges = resolved(landed_ranges(completed, pooled, landed))
    truth: dict[TopicPartition, int] = {}
    for plan in ran[: landed + 1]:
        truth.update(plan.end.offsets)
    committed = dict(completed.end.offsets)
    assert take_over(committed, [ranges]) == {tp: truth[tp] for tp in committed}


@given(steps=batches, data=st.data())
def test_a_partition_first_planned_after_the_completed_batch_starts_after_what_landed(
    steps, data
) -> None:
    """A partition the member took on after its newest completed batch started at the group's
    committed offset for it; its new owner, starting there too, skips what landed since."""
    plans = chain({A: 5}, [{A: 1}, *steps])
    landed = data.draw(st.integers(0, len(plans) - 1))
    ranges = landed_ranges(CompletedBatch("q", 0, plans[0].end), plans, landed)
    assert not isinstance(ranges, Unresolved)
    for tp in (B, C):
        first = next((p for p in plans if tp in p.end.offsets), None)
        if first is None or plans.index(first) > landed:
            assert tp not in ranges or ranges[tp].since == ranges[tp].end
            continue
        truth = max(p.end.offsets[tp] for p in plans[: landed + 1] if tp in p.end.offsets)
        assert take_over({tp: 0}, [ranges]) == {tp: truth}


def test_nothing_landed_past_the_completed_batch_leaves_the_committed_offset() -> None:
    plans = chain({A: 0}, [{A: 10}, {A: 10}, {A: 10}])
    completed = CompletedBatch("q", 1, plans[1].end)
    for version in (None, 0, 1):
        ranges = resolved(landed_ranges(completed, plans, version))
        assert take_over({A: 20}, [ranges]) == {A: 20}
    assert take_over({A: 20}, [resolved(landed_ranges(completed, plans, 2))]) == {A: 30}


def test_a_landed_batch_the_plans_do_not_reach_is_unresolved() -> None:
    plans = chain({A: 0}, [{A: 1}] * 30)
    completed = CompletedBatch("q", 2, plans[2].end)
    assert isinstance(landed_ranges(completed, plans[-PLANS_KEPT:], 25), Unresolved)


def test_a_position_below_every_landed_range_stays_an_operator_reset_reads_again() -> None:
    ranges = {A: LandedRange(100, 130)}
    assert take_over({A: 40}, [ranges]) == {A: 40}
    assert take_over({A: 100}, [ranges]) == {A: 130}
    assert take_over({A: 130}, [ranges]) == {A: 130}
    assert take_over({A: 200}, [ranges]) == {A: 200}


@given(
    ranges=st.lists(
        st.tuples(st.integers(0, 100), st.integers(0, 40)).map(
            lambda r: LandedRange(*r[:1], sum(r))
        ),
        max_size=6,
    ),
    position=st.integers(0, 150),
)
def test_take_over_follows_ranges_of_several_previous_owners(ranges, position) -> None:
    """The result is the position or a range's end, never lower, and no range holds it."""
    moved = take_over({A: position}, [{A: r} for r in ranges])[A]
    assert moved >= position
    assert moved == position or moved in {r.end for r in ranges}
    assert not any(r.since <= moved < r.end for r in ranges)


def test_plans_and_completed_batches_round_trip_through_the_files(tmp_path: Path) -> None:
    plans = chain({A: 3}, [{A: 2, B: 4}, {B: 1}])
    completed = CompletedBatch("query-1", 7, plans[0].end)
    assert decode_plans(encode_plans(plans)) == plans
    assert decode_completed(encode_completed(completed)) == completed

    (tmp_path / "group").mkdir()  # the group log's directory
    files = SinkBatchFiles(str(tmp_path / "group"))
    files.put_plans("m-1", 1, plans[:1])
    files.put_plans("m-1", 2, plans)
    files.put_completed("m-1", completed)
    files.put_plans("m-2", 1, plans[:1])
    found = files.read_all(except_member="m-2")
    assert set(found) == {"m-1"}
    assert found["m-1"].plans == plans
    assert found["m-1"].completed == completed
    assert sorted(p.name for p in (tmp_path / "group" / "_sink_batches").iterdir()) == [
        "m-1@2",
        "m-1~listener@8",
        "m-2@1",
    ]


@pytest.mark.parametrize("version", [None, 3])
def test_a_member_with_no_plans_moves_nothing(version) -> None:
    completed = CompletedBatch("q", 3, BatchEnd(1, "m", {A: 10}))
    assert take_over({A: 10}, [resolved(landed_ranges(completed, [], version))]) == {A: 10}


def spark_sink_batch(table: str, query_id: str, batch_id: int) -> None:
    """A commit as Spark's Delta sink makes it: rows and txn(query id, batch id)."""
    rows = pa.table({"partition": pa.array([0], pa.int32()), "offset": pa.array([0], pa.int64())})
    properties = CommitProperties(app_transactions=[Transaction(query_id, batch_id)])
    write_deltalake(table, rows, mode="append", commit_properties=properties)


def test_a_new_owner_reads_the_dead_member_s_files_and_the_table(tmp_path: Path) -> None:
    """The reader's I/O on disk: the dead member's plans, its listener's completed batch and its
    query's transaction in the table move the new owner's position; its own files do not."""
    store, table = str(tmp_path / "groups"), str(tmp_path / "events")
    (tmp_path / "groups" / "g").mkdir(parents=True)  # the group log's directory
    plans = chain({A: 0}, [{A: 10}, {A: 10}, {A: 10}, {A: 10}])
    dead = SinkBatches(table, store=store, group_id="g")
    for plan in plans:
        dead.record(plan)
    files: dict = {}
    completed = CompletedBatch("q-dead", 1, plans[1].end)
    record_completed(store, "g", "m", completed, storage_options=None, files=files)
    new_owner = SinkBatches(table, store=store, group_id="g")

    def positions(me: str, at: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        return new_owner.positions(me, at, committed={}, members={me})

    assert positions("m-new", {A: 20}) == {A: 20}  # no table yet
    for batch_id in range(3):
        spark_sink_batch(table, "q-dead", batch_id)
    spark_sink_batch(table, "q-other", 9)
    assert positions("m-new", {A: 20}) == {A: 30}  # batch 2 landed
    spark_sink_batch(table, "q-dead", 3)
    assert positions("m-new", {A: 20}) == {A: 40}
    assert positions("m-new", {A: 5}) == {A: 5}  # below: a reset reads again
    assert positions("m", {A: 20}) == {A: 20}  # a member's own files are not read


def test_an_earlier_incarnation_of_a_query_that_went_on_is_read_from_the_newest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A query restarted on its checkpoint under a new member: the table holds batches its first
    incarnation never planned, which its newest incarnation's files account for. The first
    incarnation's files are not read, and nothing says what it landed is unknown."""
    store, table = str(tmp_path / "groups"), str(tmp_path / "events")
    (tmp_path / "groups" / "g").mkdir(parents=True)
    first = SinkBatches(table, store=store, group_id="g")
    plans = chain({A: 0}, [{A: 10}, {A: 10}])  # batches 0 and 1, member "m"
    for plan in plans:
        first.record(plan)
    files: dict = {}
    record_completed(store, "g", "m", CompletedBatch("q", 1, plans[1].end),
                     storage_options=None, files=files)  # fmt: skip
    later_end = BatchEnd(9, "m-later", {A: 40})  # its batch 3 ended at 40
    record_completed(store, "g", "m-later", CompletedBatch("q", 3, later_end),
                     storage_options=None, files=files)  # fmt: skip
    for batch_id in range(4):
        spark_sink_batch(table, "q", batch_id)
    caplog.set_level("INFO", logger="spark_kafka_group.sink.spark_delta")
    new_owner = SinkBatches(table, store=store, group_id="g")
    assert new_owner.positions("m-new", {A: 40}, committed={}, members={"m-new"}) == {A: 40}
    assert "not known" not in caplog.text
    # The first incarnation's files are deleted; the newest's stay (40 is not committed).
    left = sorted(p.name for p in (tmp_path / "groups" / "g" / "_sink_batches").iterdir())
    assert left == ["m-later~listener@4"]


def test_a_query_restarted_under_a_new_member_is_followed_across_its_incarnations(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A query restarted on its checkpoint replays the batch its first incarnation planned: the
    listener records that batch complete under the member that planned it (its end names that
    member), while the batches planned since are the new member's. Killed after its next batch
    landed and down past its session timeout, its partitions' new owner follows the chain from
    the first incarnation's completed batch through the second's plans, and starts after what
    landed."""
    store, table = str(tmp_path / "groups"), str(tmp_path / "events")
    (tmp_path / "groups" / "g").mkdir(parents=True)
    files: dict = {}
    first = SinkBatches(table, store=store, group_id="g")
    plans = chain({A: 0}, [{A: 10}, {A: 10}, {A: 10}], member="m1")  # batches 0, 1 and 2
    for plan in plans:
        first.record(plan)
    # Batch 2, planned by m1, ran again under m2 (m1 died in it) and completed.
    record_completed(store, "g", "m1", CompletedBatch("q", 2, plans[2].end),
                     storage_options=None, files=files)  # fmt: skip
    second = SinkBatches(table, store=store, group_id="g")
    batch_3 = PlannedBatch(plans[2].end, BatchEnd(9, "m2", {A: 45}))
    second.record(batch_3)
    for batch_id in range(4):  # batch 3 landed; m2 died before its group commit
        spark_sink_batch(table, "q", batch_id)
    caplog.set_level("INFO", logger="spark_kafka_group.sink.spark_delta")
    new_owner = SinkBatches(table, store=store, group_id="g")
    committed = {A: 30}  # batch 2's end, its group commit
    assert new_owner.positions("m-new", committed, committed=committed,
                               members={"m-new"}) == {A: 45}  # fmt: skip
    assert "not known" not in caplog.text


def test_a_plan_an_earlier_incarnation_made_and_spark_never_ran_is_not_followed() -> None:
    """A member that died between writing its plan and Spark's offset log leaves a plan that
    never ran; its query's next incarnation plans that batch again after the same end. The
    chain follows the later incarnation's plan; two later ones are ambiguous (unresolved)."""
    plans = chain({A: 0}, [{A: 10}, {A: 10}], member="m1")
    stale = PlannedBatch(plans[1].end, BatchEnd(3, "m1", {A: 25}))
    rerun = PlannedBatch(plans[1].end, BatchEnd(9, "m2", {A: 40}))
    completed = CompletedBatch("q", 1, plans[1].end)
    for pool in ([*plans, stale, rerun], [rerun, *plans, stale]):
        ranges = resolved(landed_ranges(completed, pool, 2))
        assert take_over({A: 20}, [ranges]) == {A: 40}
    another = PlannedBatch(plans[1].end, BatchEnd(11, "m3", {A: 50}))
    assert isinstance(landed_ranges(completed, [*plans, rerun, another], 2), Unresolved)
    assert take_over({A: 20}, [resolved(landed_ranges(completed, [*plans, rerun], 1))]) == {A: 20}


def test_files_are_spent_once_their_member_is_gone_and_what_it_landed_is_committed() -> None:
    landed = {A: LandedRange(10, 20), B: LandedRange(5, 5)}
    found: dict[str, Found] = {
        "gone-committed": landed,
        "gone-uncommitted": {A: LandedRange(10, 30)},
        "alive": landed,
        "superseded": Superseded("q"),
        "unresolved": Unresolved("plans too old"),
        "alive-superseded": Superseded("q"),
    }
    committed = {A: 20, B: 5}
    members = {"alive", "alive-superseded"}
    assert spent(found, committed, members) == {"gone-committed", "superseded", "unresolved"}
    # A partition the group never committed keeps its landed range's files.
    assert spent({"gone": {C: LandedRange(0, 1)}}, committed, set()) == set()


@given(
    st.dictionaries(
        st.sampled_from(["m1", "m2", "m3", "m4"]),
        st.dictionaries(
            st.sampled_from([A, B, C]),
            st.tuples(st.integers(0, 50), st.integers(0, 50)).map(
                lambda t: LandedRange(min(t), max(t))
            ),
        ),
    ),
    st.dictionaries(st.sampled_from([A, B, C]), st.integers(0, 60)),
    st.sets(st.sampled_from(["m1", "m2", "m3", "m4"])),
)
def test_no_files_a_later_owner_may_need_are_spent(found, committed, members) -> None:
    """Whatever the group's commits: a member in the group keeps its files, and so does one
    with a landed record above the group's commit of its partition (a new owner starting at
    that commit needs them to skip it)."""
    for member in spent(found, committed, members):
        assert member not in members
        assert all(committed.get(tp, -1) >= r.end for tp, r in found[member].items())


def test_a_takeover_deletes_the_files_of_a_gone_member_whose_landed_records_are_committed(
    tmp_path: Path,
) -> None:
    store, table = str(tmp_path / "groups"), str(tmp_path / "events")
    directory = tmp_path / "groups" / "g" / "_sink_batches"
    (tmp_path / "groups" / "g").mkdir(parents=True)
    files: dict = {}
    for member, query in (("dead", "q-dead"), ("alive", "q-alive")):
        plans = chain({A: 0}, [{A: 10}, {A: 10}], member=member)
        writer = SinkBatches(table, store=store, group_id="g")
        for plan in plans:
            writer.record(plan)
        record_completed(store, "g", member, CompletedBatch(query, 0, plans[0].end),
                         storage_options=None, files=files)  # fmt: skip
        for batch_id in range(2):
            spark_sink_batch(table, query, batch_id)
    new_owner = SinkBatches(table, store=store, group_id="g")

    def positions(committed: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        return new_owner.positions("m-new", {A: 10}, committed=committed,
                                   members={"m-new", "alive"})  # fmt: skip

    assert positions({A: 10}) == {A: 20}  # "dead" landed [10, 20), not committed: kept
    assert {p.name.split("@")[0] for p in directory.iterdir()} == {
        "dead",
        "dead~listener",
        "alive",
        "alive~listener",
    }
    assert positions({A: 20}) == {A: 20}  # committed past what it landed: deleted
    assert {p.name.split("@")[0] for p in directory.iterdir()} == {"alive", "alive~listener"}
