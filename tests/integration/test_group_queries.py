"""Several kafka-group queries in one SparkSession share a topic as one consumer group."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

import spark_kafka_group
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.listener.progress import group_offsets
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.testing.group_log import group_records
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until
from tests.delivery import check_delivery, collected_batches, log_lines
from tests.streaming import Collected, source_options, start_query

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def partitions_of(collected: Collected) -> set[int]:
    return {p for p, _ in collected.records}


@pytest.mark.smoke
def test_two_queries_split_the_partitions_and_read_everything_once(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 6)
    options = source_options(bootstrap_servers, topic_name, "g-two", group_store)
    a, b = Collected(), Collected()
    qa = start_query(spark, options, str(tmp_path / "a"), a, available_now=False)
    qb = start_query(spark, options, str(tmp_path / "b"), b, available_now=False)
    try:
        # Both members in one stable generation before the data arrives.
        def two_members() -> bool:
            info = spark_kafka_group.describe_group(group_store, "g-two")
            owned = [tp for m in info.members for tp in m.assignment]
            return info.state == "Stable" and len(info.members) == 2 and len(owned) == 6

        wait_until(two_members, 180, "two members sharing 6 partitions")
        counts = produce_sample(bootstrap_servers, topic_name, partitions=6, per_partition=100)
        total = sum(counts.values())
        wait_until(lambda: a.count() + b.count() >= total, 120, f"{total} records")
        time.sleep(2)  # anything extra (a duplicate) would arrive now
    finally:
        qa.stop()
        qb.stop()
    # Every record exactly once (no batch of a previous owner may be read again: nothing
    # moved after the data arrived), and the log's ownership and commit checks.
    records = group_records(group_store, "g-two")
    batches = collected_batches("a", a) + collected_batches("b", b)
    result = check_delivery(counts, batches, records, topic=topic_name, allowed_batches=0)
    assert result.ok, f"{result.details()}\ngroup log:\n{log_lines(records)}"
    assert partitions_of(a) and partitions_of(b)
    assert partitions_of(a).isdisjoint(partitions_of(b))
    assert partitions_of(a) | partitions_of(b) == set(range(6))


def test_a_third_query_joins_and_only_moved_partitions_pause(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 6)
    options = source_options(bootstrap_servers, topic_name, "g-three", group_store)
    a, b, c = Collected(), Collected(), Collected()
    producer = SteadyProducer(bootstrap_servers, topic_name, 6)
    qa = start_query(spark, options, str(tmp_path / "a"), a, available_now=False)
    qb = start_query(spark, options, str(tmp_path / "b"), b, available_now=False)
    queries = [qa, qb]
    try:
        wait_until(
            lambda: (
                len(spark_kafka_group.describe_group(group_store, "g-three").members) == 2
                and spark_kafka_group.describe_group(group_store, "g-three").state == "Stable"
            ),
            90,
            "two stable members",
        )
        producer.start()
        wait_until(lambda: a.count() > 0 and b.count() > 0, 60, "both members reading")
        before = {id(x): (partitions_of(x), max(x.batches, default=-1)) for x in (a, b)}
        joined_at = time.monotonic()
        qc = start_query(spark, options, str(tmp_path / "c"), c, available_now=False)
        queries.append(qc)
        wait_until(lambda: c.count() > 0, 90, "the newcomer's first record")
        first_record_s = time.monotonic() - joined_at
        wait_until(
            lambda: (
                spark_kafka_group.describe_group(group_store, "g-three").state == "Stable"
                and len(spark_kafka_group.describe_group(group_store, "g-three").members) == 3
            ),
            60,
            "three stable members",
        )
        time.sleep(3)
        final = producer.stop()
        wait_until(
            lambda: a.count() + b.count() + c.count() >= sum(final.values()),
            120,
            "every produced record",
        )
    finally:
        producer.stop()
        for q in queries:
            q.stop()

    # From the newcomer's JOIN record in the group log to its first record in the sink.
    newcomer = next(group_offsets(qc.lastProgress)).member
    log = group_records(group_store, "g-three")
    joined_ms = min(
        r.timestamp_ms for r in log if r.kind == RecordKind.JOIN and r.member_id == newcomer
    )
    first_time = c.first_record_time()
    assert first_time is not None
    first_ms = first_time * 1000.0
    join_to_first_record_s = (first_ms - joined_ms) / 1000.0
    # Where the time went: the rebalance's records, then the newcomer's first record.
    members = [next(group_offsets(q.lastProgress)).member for q in queries]
    names = dict(zip(members, "abc", strict=True))
    steps = [
        f"{(r.timestamp_ms - joined_ms) / 1000:+.2f}s {r.kind} {names.get(r.member_id or '', '?')}"
        for r in log
        if joined_ms <= r.timestamp_ms <= first_ms
        and r.kind in (RecordKind.JOIN, RecordKind.SYNC, RecordKind.REVOKE)
    ]
    print("rebalance:", ", ".join(steps), f", {join_to_first_record_s:+.2f}s first record c")

    def started(progress: dict) -> float:
        return datetime.fromisoformat(progress["timestamp"]).timestamp()

    first_batches = [
        f"#{p['batchId']} at {started(p) - joined_ms / 1000:+.2f}s: {p['numInputRows']} rows "
        f"in {p['durationMs'].get('triggerExecution')} ms"
        for p in (json.loads(x.json) for x in qc.recentProgress)
    ][:4]
    print("newcomer's first batches:", "; ".join(first_batches))
    everything = sorted(a.records + b.records + c.records)
    expected = sorted((p, o) for p, n in final.items() for o in range(n))
    assert set(everything) == set(expected), "nothing lost"
    duplicates = len(everything) - len(set(everything))
    print(
        f"newcomer: first record {join_to_first_record_s:.2f}s after its JOIN "
        f"({first_record_s:.1f}s after query start); duplicates: {duplicates}"
    )
    # The documented bound (README, docs/concepts.md): a record is read twice only as the old
    # owner's last uncommitted batch of a partition that moved; nothing lost, no gap.
    batches = [
        batch
        for name, collected in (("a", a), ("b", b), ("c", c))
        for batch in collected_batches(name, collected)
    ]
    check_delivery(final, batches, log, topic=topic_name, allowed_batches=1).assert_ok()

    # Only the partitions that move pause: every batch of an original member that was
    # planned while the newcomer joined still reads each partition it keeps.
    for collected in (a, b):
        kept, last_batch_before = before[id(collected)]
        kept &= partitions_of(collected) - partitions_of(c)
        during = [
            rows for batch_id, rows in sorted(collected.batches.items())
            if batch_id > last_batch_before and rows
        ]  # fmt: skip
        assert during, "the original member kept consuming"
        for rows in during[:-1]:
            assert kept <= {p for p, _, _ in rows}, (kept, {p for p, _, _ in rows})
    assert partitions_of(c), "the newcomer got partitions"
    # How soon (two trigger intervals + two heartbeat intervals is the target) is
    # benchmarks/bench_join.py's figure; here the newcomer only had to read (wait_until above).
