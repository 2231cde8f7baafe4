"""``assignmentStrategy`` with real queries: a user's ``module:Class`` assignor, and a running
group upgraded from ``range`` to ``cooperative-sticky`` by rolling restarts (KIP-429's two
bounces), checked by the delivery checker and the group log."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from pyspark.sql.streaming import StreamingQuery

import spark_kafka_group
from spark_kafka_group.group import GroupMetadata, GroupRecord, TopicPartition, apply
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.payloads import GenerationPayload
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.testing.group_log import group_records
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until
from tests.delivery import Batch, check_delivery, collected_batches
from tests.streaming import Collected, source_options, start_query, stop_between_batches

pytestmark = [pytest.mark.spark, pytest.mark.broker]

CS, RANGE = "cooperative-sticky", "range"


def settled(store: str, group: str, members: int, partitions: int, protocol: str) -> bool:
    """Stable on ``protocol``, every partition assigned, nobody revoking."""
    info = spark_kafka_group.describe_group(store, group)
    owned = [tp for m in info.members for tp in m.assignment]
    return (
        info.state == "Stable"
        and info.protocol == protocol
        and len(info.members) == members
        and len(owned) == partitions
        and not any(m.revoking for m in info.members)
    )


def test_a_module_class_assignor_assigns_a_real_group(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    # tests/ is on the PYTHONPATH of Spark's Python workers (tests/conftest.py), as a user's
    # module must be on the driver's: the streaming source runs there.
    create_topic(bootstrap_servers, topic_name, 4)
    group = "g-custom"
    options = source_options(
        bootstrap_servers, topic_name, group, group_store,
        assignmentStrategy="tests.custom_assignors:OneAndRestAssignor",
    )  # fmt: skip
    with pytest.raises(Exception, match=r"cannot import module 'tests\.no_such_module'"):
        broken = dict(options, assignmentStrategy="tests.no_such_module:OneAndRestAssignor")
        spark.readStream.format("kafka-group").options(**broken).load()
    collected = {"a": Collected(), "b": Collected()}
    queries = [
        start_query(spark, options, str(tmp_path / name), c, available_now=False)
        for name, c in collected.items()
    ]
    try:
        wait_until(
            lambda: settled(group_store, group, 2, 4, "one-and-rest"), 120, "two stable members"
        )
        counts = produce_sample(bootstrap_servers, topic_name, partitions=4, per_partition=50)
        total = sum(counts.values())
        wait_until(lambda: sum(c.count() for c in collected.values()) >= total, 90, "every record")
        info = spark_kafka_group.describe_group(group_store, group)
    finally:
        for q in queries:
            q.stop()
    # The assignor's split: the first member (dynamic members go by member id) gets partition
    # 0 alone, the other 1, 2 and 3; no built-in splits 4 partitions 1 / 3.
    by_member = {m.member_id: sorted(p for _, p in m.assignment) for m in info.members}
    first, second = sorted(by_member)
    assert by_member == {first: [0], second: [1, 2, 3]}
    read = sorted(len({p for p, _ in c.records}) for c in collected.values())
    assert read == [1, 3], "each query read the partitions the assignor gave it"
    everything = sorted(r for c in collected.values() for r in c.records)
    assert everything == sorted((p, o) for p, n in counts.items() for o in range(n))


def revocations(records: Sequence[GroupRecord]) -> tuple[Counter[str], int, list[str]]:
    """Replay the log record by record. Returns: partitions a member gave up and got back with
    nobody holding them in between (needless revocations), by the group's protocol when they
    were given up; how many times a member kept partitions through a new generation on
    cooperative-sticky; and the protocol of each generation."""
    group = GroupMetadata("check")
    dropped: dict[TopicPartition, tuple[str, str | None]] = {}
    needless: Counter[str] = Counter()
    kept_through = 0
    protocols: list[str] = []
    for record in records:
        before = {mid: set(m.held) for mid, m in group.members.items()}
        protocol = group.protocol
        apply(group, record)
        after = {mid: set(m.held) for mid, m in group.members.items()}
        for mid, held in before.items():
            for tp in held - after.get(mid, set()):
                dropped[tp] = (mid, protocol)
        for mid, held in after.items():
            for tp in held - before.get(mid, set()):
                previous = dropped.pop(tp, None)
                if previous is not None and previous[0] == mid:
                    needless[str(previous[1])] += 1
        if record.kind == RecordKind.GENERATION and group.members:
            protocols.append(str(group.protocol))
            everyone_cooperative = all(
                CS in m.profile.protocol_names for m in group.members.values()
            )
            assert (group.protocol == CS) == everyone_cooperative, (
                f"generation {group.generation} uses {group.protocol} with members "
                f"{[m.profile.protocol_names for m in group.members.values()]}"
            )
            if group.protocol == CS:
                kept_through += sum(1 for mid, held in before.items() if held and mid in after)
    return needless, kept_through, protocols


def test_rolling_upgrade_from_range_to_cooperative_sticky(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    partitions, group = 4, "g-upgrade"
    create_topic(bootstrap_servers, topic_name, partitions)
    incarnations: list[tuple[str, Collected]] = []
    queries: dict[str, StreamingQuery] = {}

    def start(name: str, strategy: str) -> Collected:
        collected = Collected()
        options = source_options(
            bootstrap_servers, topic_name, group, group_store, assignmentStrategy=strategy
        )
        checkpoint = str(tmp_path / name)
        # A 2 s trigger leaves room between batches to stop in, even on a loaded machine.
        queries[name] = start_query(
            spark, options, checkpoint, collected, available_now=False, processing_time="2 seconds"
        )
        incarnations.append((name, collected))
        return collected

    producer = SteadyProducer(bootstrap_servers, topic_name, partitions)
    try:
        start("a", RANGE)
        start("b", RANGE)
        wait_until(lambda: settled(group_store, group, 2, partitions, RANGE), 120, "range group")
        producer.start()
        wait_until(lambda: all(c.count() for _, c in incarnations), 60, "both reading")
        # First bounce: both assignors, cooperative first. The group stays on range (eager)
        # until both list cooperative-sticky. Second bounce: cooperative-sticky alone.
        for strategy, chosen in ((f"{CS},{RANGE}", (RANGE, CS)), (CS, (CS, CS))):
            for name, protocol in zip(("a", "b"), chosen, strict=True):
                before = {m.member_id for m in spark_kafka_group.describe_group(
                    group_store, group).members}  # fmt: skip
                stop_between_batches(queries[name])
                collected = start(name, strategy)

                def restarted(protocol: str = protocol, before: set[str] = before) -> bool:
                    info = spark_kafka_group.describe_group(group_store, group)
                    new = {m.member_id for m in info.members} - before
                    return len(new) == 1 and settled(group_store, group, 2, partitions, protocol)

                wait_until(restarted, 90, f"{name} restarted with {strategy}")
                wait_until(lambda c=collected: c.count() > 0, 60, f"{name} reading again")
        final = producer.stop()
        wait_until(
            lambda: all(
                spark_kafka_group.describe_group(group_store, group).committed.get(
                    TopicPartition(topic_name, p)
                ) == n
                for p, n in final.items()
            ),
            90, "every record committed",
        )  # fmt: skip
    finally:
        producer.stop()
        for q in queries.values():
            q.stop()

    records = group_records(group_store, group)
    batches: list[Batch] = [
        b for i, (name, c) in enumerate(incarnations) for b in collected_batches(name, c, pid=i)
    ]
    result = check_delivery(final, batches, records, topic=topic_name)
    result.assert_ok()  # nothing lost, no duplicate beyond a moved partition's last batch
    needless, kept_through, protocols = revocations(records)
    # Eager rebalances (range) may re-read a moved partition's last uncommitted batch (legal,
    # checked above); once the group is cooperative, nothing is read twice.
    cooperative_since = min(
        r.timestamp_ms / 1000 for r in records
        if r.kind == RecordKind.GENERATION and GenerationPayload.of(r).protocol == CS
    )  # fmt: skip
    reads: dict[tuple[int, int], list[float]] = {}
    for b in batches:
        for rec in b.records:
            reads.setdefault(rec, []).append(b.time)
    again = sorted(
        r for r, ts in reads.items() if len(ts) > 1 and sorted(ts)[1] > cooperative_since
    )
    print(f"duplicates by (incarnation, partition): {result.duplicates_by}")
    assert again == [], "read twice after the group became cooperative"
    print(f"generations: {protocols}; needless revocations by protocol: {dict(needless)}; "
          f"kept through cooperative generations: {kept_through}")  # fmt: skip
    first_cs = protocols.index(CS)
    assert set(protocols[:first_cs]) == {RANGE} and set(protocols[first_cs:]) == {CS}
    assert needless[RANGE] > 0, "on range a rejoin gives up everything, even what stays"
    assert needless[CS] == 0, "on cooperative-sticky a partition that stays is never revoked"
    assert kept_through > 0, "members kept partitions through cooperative rebalances"
