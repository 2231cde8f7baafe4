"""A member's life follows its query's: it leaves when the query ends, a restarted query takes
its previous incarnation's place at once, and a Trigger.AvailableNow run reads its share.

Real Spark, a real broker and a real Delta group log. The restart figures are printed; the
bounds asserted are generous (well below the 45 s session timeout a restart used to wait
for); ``benchmarks/bench_restart.py`` measures them. A SIGKILLed driver restarted on its checkpoint
is in ``test_member_processes.py`` (the restart-from-checkpoint test).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

import spark_kafka_group
from spark_kafka_group.errors import GroupJoinTimeoutError
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.testing.group_log import group_records
from spark_kafka_group.testing.waiting import wait_until
from tests.delivery import log_lines
from tests.processes import MemberProcess
from tests.streaming import (
    Collected,
    run_available_now,
    source_options,
    start_query,
    stop_between_batches,
)

pytestmark = [pytest.mark.spark, pytest.mark.broker]

PARTITIONS = 3
#: Kafka's defaults: a restart must not depend on them being short.
DEFAULT_TIMEOUTS = {
    "heartbeatIntervalMs": "3000",
    "sessionTimeoutMs": "45000",
    "rebalanceTimeoutMs": "60000",
}


def leaves(store: str, group: str) -> dict[str | None, int]:
    """Member id -> time (ms) of its LEAVE record."""
    return {
        r.member_id: r.timestamp_ms
        for r in group_records(store, group)
        if r.kind == RecordKind.LEAVE
    }


@pytest.fixture
def topic(bootstrap_servers, topic_name) -> str:
    create_topic(bootstrap_servers, topic_name, PARTITIONS)
    return topic_name


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_a_stopped_dynamic_member_leaves_and_a_static_one_stays(
    spark, bootstrap_servers, topic, group_store, tmp_path: Path, static: bool
) -> None:
    group = f"g-stop-{static}"
    extra = {"groupInstanceId": "stays-1"} if static else {}
    counts = produce_sample(bootstrap_servers, topic, partitions=PARTITIONS, per_partition=5)
    collected = Collected()
    options = source_options(bootstrap_servers, topic, group, group_store, **extra)
    query = start_query(spark, options, str(tmp_path / "ck"), collected, available_now=False)
    try:
        wait_until(lambda: collected.count() >= sum(counts.values()), 120, "every record")
        member = _current_member(group_store, group)
    finally:
        query.stop()
    stopped = time.time()
    if static:
        time.sleep(3)  # long enough for a LEAVE to show up, were one written
        assert member not in leaves(group_store, group)
        info = spark_kafka_group.describe_group(group_store, group)
        assert [m.member_id for m in info.members] == [member]  # waits for its restart
        return
    wait_until(lambda: member in leaves(group_store, group), 10, "the LEAVE record")
    left_after = leaves(group_store, group)[member] / 1000 - stopped
    print(f"LEAVE written {left_after:+.2f}s after query.stop() returned")
    assert spark_kafka_group.describe_group(group_store, group).members == ()
    # The last batch was committed before the LEAVE: a new query of the group reads nothing.
    info = spark_kafka_group.describe_group(group_store, group)
    assert info.committed == {(topic, p): n for p, n in counts.items()}


class FailingSink(Collected):
    """Collects, then fails the query at its first batch after ``fail.set()``."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = threading.Event()

    def sink(self, frame, batch_id: int) -> None:
        super().sink(frame, batch_id)
        if self.fail.is_set() and self.batches[batch_id]:
            raise RuntimeError("the sink failed (test)")


# After a failure on pyspark 4.0 / 4.1 (no ``latestOffset(start)``), the batch after the
# replayed one must continue from the replayed batch's end, not from the group's commit.
@pytest.mark.parametrize(
    "restart", ["same", "new", pytest.param("after-failure", marks=pytest.mark.smoke)]
)
def test_a_restarted_query_reads_new_records_at_once(
    spark, bootstrap_servers, topic, group_store, tmp_path: Path, restart: str
) -> None:
    """The notebook pattern: stop (or a failure), start again in the same session, Kafka's
    default timeouts and a 1 s trigger. Before: nothing for 44-46 s (the old incarnation held
    everything until its session timeout expired it)."""
    group = f"g-restart-{restart}"
    options = source_options(bootstrap_servers, topic, group, group_store, **DEFAULT_TIMEOUTS)
    first_counts = produce_sample(bootstrap_servers, topic, partitions=PARTITIONS, per_partition=5)
    first = FailingSink()
    query = start_query(spark, options, str(tmp_path / "ck-1"), first, available_now=False,
                        processing_time="1 second")  # fmt: skip
    try:
        wait_until(lambda: first.count() >= sum(first_counts.values()), 120, "the first records")
        if restart == "after-failure":
            first.fail.set()
            failing = produce_sample(
                bootstrap_servers, topic, partitions=PARTITIONS, per_partition=1,
                start=first_counts[0],
            )  # fmt: skip
            first_counts = {p: first_counts[p] + failing[p] for p in first_counts}
            with pytest.raises(StreamingQueryException, match="the sink failed"):
                query.awaitTermination(60)
        else:  # a stop inside a batch whose sink ran leaves it to be read again
            stop_between_batches(query)
    finally:
        query.stop()
    checkpoint = "new" if restart == "new" else "same"

    second = Collected()
    restarted = time.time()
    ck = "ck-1" if checkpoint == "same" else "ck-2"
    query = start_query(spark, options, str(tmp_path / ck), second, available_now=False,
                        processing_time="1 second")  # fmt: skip
    try:
        more = produce_sample(
            bootstrap_servers, topic, partitions=PARTITIONS, per_partition=5,
            start=first_counts[0],
        )  # fmt: skip
        wait_until(lambda: second.count() >= sum(more.values()), 60, "the new records")
        first_time = second.first_record_time()
        assert first_time is not None
        figure = first_time - restarted
    finally:
        query.stop()
    # How soon is benchmarks/bench_restart.py's figure. What makes it soon: the stopped (or
    # failed) incarnation left or was replaced, so nobody waited for its session timeout to
    # expire it.
    print(f"restart ({restart}): first new record {figure:.2f}s after the restart")
    records = group_records(group_store, group)
    # What a failure shows: the group log, and the batches each incarnation read.
    shown = (
        f"group log:\n{log_lines(records)}\nfirst: {batch_ranges(first)}\n"
        f"second: {batch_ranges(second)}"
    )
    expired = [r.member_id for r in records if r.kind == RecordKind.EXPIRE]
    assert expired == [], f"the restart waited for the session timeout to expire {expired}\n{shown}"
    expected = sorted(
        (p, o) for p in range(PARTITIONS) for o in range(first_counts[p] + more[p])
    )  # fmt: skip
    read = Counter(first.records + second.records)
    lost = sorted(set(expected) - set(read))
    assert sorted(read) == expected, (
        f"lost {lost[:10]}, extra {sorted(set(read) - set(expected))[:10]}\n{shown}"
    )
    twice = sorted(r for r, n in read.items() if n > 1)
    assert max(read.values()) <= 2, f"{[r for r, n in read.items() if n > 2][:10]}\n{shown}"
    # Read twice: only the batch the failure interrupted (Spark runs it again on restart).
    last = max((b for b, rows in first.batches.items() if rows), default=None)
    failed = {(p, o) for p, o, _ in first.batches[last]} if twice and last is not None else set()
    assert set(twice) <= failed and (restart == "after-failure" or not twice), (
        f"{twice[:10]}\n{shown}"
    )


@pytest.mark.smoke
def test_available_now_runs_back_to_back_read_exactly_the_new_records(
    spark, bootstrap_servers, topic, group_store, tmp_path: Path
) -> None:
    group = "g-avnow"
    options = source_options(bootstrap_servers, topic, group, group_store)
    first_counts = produce_sample(bootstrap_servers, topic, partitions=PARTITIONS, per_partition=7)
    first = run_available_now(spark, options, str(tmp_path / "ck-1"))
    assert sorted(first.records) == sorted(
        (p, o) for p, n in first_counts.items() for o in range(n)
    )
    more = produce_sample(
        bootstrap_servers, topic, partitions=PARTITIONS, per_partition=4, start=first_counts[0]
    )
    second = run_available_now(spark, options, str(tmp_path / "ck-2"))  # a new checkpoint
    assert sorted(second.records) == sorted(
        (p, o) for p, n in more.items() for o in range(first_counts[p], first_counts[p] + n)
    )


def batch_ranges(collected: Collected) -> dict[int, dict[int, tuple[int, int]]]:
    """Batch id -> partition -> (first, last) offset read: a short form of what a query read."""
    ranges: dict[int, dict[int, tuple[int, int]]] = {}
    with collected.lock:
        for batch, rows in sorted(collected.batches.items()):
            for p, o, _ in rows:
                low, high = ranges.setdefault(batch, {}).get(p, (o, o))
                ranges[batch][p] = (min(low, o), max(high, o))
    return ranges


def journal_records(member: MemberProcess) -> list[tuple[int, int]]:
    return sorted(member.records())


def test_available_now_runs_in_separate_driver_processes(
    bootstrap_servers, topic, group_store, tmp_path: Path
) -> None:
    """Two spark-submit runs, the second right after the first has exited."""
    group = "g-avnow-proc"
    counts = produce_sample(bootstrap_servers, topic, partitions=PARTITIONS, per_partition=6)
    runs = []
    expected_total = dict.fromkeys(range(PARTITIONS), 0)
    for run in range(2):
        if run:
            counts = produce_sample(
                bootstrap_servers, topic, partitions=PARTITIONS, per_partition=4,
                start=expected_total[0],
            )  # fmt: skip
        member = MemberProcess(
            tmp_path, f"run{run}", bootstrap_servers=bootstrap_servers, topic=topic,
            group_id=group, group_store=group_store, extra=["--available-now"],
        ).start()  # fmt: skip
        assert member.process is not None
        assert member.process.wait(180) == 0, member.output()[-3000:]
        member.stop()
        expected = sorted(
            (p, o) for p, n in counts.items()
            for o in range(expected_total[p], expected_total[p] + n)
        )  # fmt: skip
        assert journal_records(member) == expected, f"run {run}"
        expected_total = {p: expected_total[p] + counts[p] for p in counts}
        runs.append(member)


def _current_member(store: str, group: str) -> str:
    (member,) = spark_kafka_group.describe_group(store, group).members
    return member.member_id


# Not in the smoke suite: what it adds to the AvailableNow runs there is the group's expiry of a
# killed member, which no pyspark version changes, and it is the suite's longest (80 s).
@pytest.mark.long
def test_available_now_after_a_sigkill_waits_for_the_stale_member(
    spark, bootstrap_servers, topic, group_store, tmp_path: Path
) -> None:
    group = "g-sigkill-avnow"
    counts = produce_sample(bootstrap_servers, topic, partitions=PARTITIONS, per_partition=5)
    victim = MemberProcess(
        tmp_path, "victim", bootstrap_servers=bootstrap_servers, topic=topic, group_id=group,
        group_store=group_store, session_timeout_ms=30_000,
    )  # fmt: skip
    try:
        victim.start()
        committed = {(topic, p): n for p, n in counts.items()}
        wait_until(
            lambda: spark_kafka_group.describe_group(group_store, group).committed == committed,
            180, "the victim's commit of every record",
        )  # fmt: skip
        stale = _current_member(group_store, group)
        victim.kill()
    finally:
        victim.stop()
    more = produce_sample(
        bootstrap_servers, topic, partitions=PARTITIONS, per_partition=5, start=counts[0]
    )
    # A bound shorter than the stale member's session timeout: the run fails, naming it.
    impossible = source_options(
        bootstrap_servers, topic, group, group_store,
        sessionTimeoutMs="6000", rebalanceTimeoutMs="1000",
    )  # fmt: skip
    with pytest.raises(StreamingQueryException) as failed:
        run_available_now(spark, impossible, str(tmp_path / "ck-impossible"), timeout_s=60)
    message = str(failed.value)
    assert GroupJoinTimeoutError.__name__ in message, message
    for needed in (group, stale, "rebalanceTimeoutMs", "sessionTimeoutMs"):
        assert needed in message, f"{needed!r} not in: {message}"
    # It ended before its first batch: its member left all the same.
    failed_member = message.split("did not give member ", 1)[1].split()[0]
    wait_until(lambda: failed_member in leaves(group_store, group), 10, "the failed run's LEAVE")
    # Within the bound (the group's timeouts): it waits for the stale member's expiry, then
    # reads everything new. The stale member is expired its session timeout (30 s) after this
    # run first sees it (on this run's clock, not the writer's: docs/design.md "Clocks"), so
    # the bound's rebalance timeout is the margin left for start-up and the rebalance.
    options = source_options(bootstrap_servers, topic, group, group_store,
                             sessionTimeoutMs="30000", rebalanceTimeoutMs="20000")  # fmt: skip
    collected = run_available_now(spark, options, str(tmp_path / "ck"), timeout_s=120)
    expected = sorted(
        (p, o) for p, n in more.items() for o in range(counts[p], counts[p] + n)
    )  # fmt: skip
    assert sorted(collected.records) == expected
    assert any(
        r.kind == RecordKind.EXPIRE and r.member_id == stale
        for r in group_records(group_store, group)
    )
