"""Members in separate processes: restarted as a static member, paused as a zombie, killed and
restarted on their checkpoints (a member SIGKILLed for good, its partitions moving, is
test_faults.py's bounce).

The survivor is a query in the test's SparkSession; the other member is ``tests/member_app.py``
in its own process (its own Spark driver), as a second spark-submit job would be.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import spark_kafka_group
from spark_kafka_group.group import GroupError, replay
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.group.offsets import commit_offsets
from spark_kafka_group.group.payloads import JoinPayload, payload_of
from spark_kafka_group.member import GroupLogClient
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.source.pyspark_features import HAS_ADMISSION_CONTROL
from spark_kafka_group.testing.group_log import group_records
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until
from tests.delivery import check_delivery, collected_batches, journal_batches
from tests.groups import stable_with
from tests.processes import MemberProcess
from tests.streaming import Collected, source_options, start_query

pytestmark = [pytest.mark.spark, pytest.mark.broker]

PARTITIONS = 6


def describe(store: str, group: str):
    return spark_kafka_group.describe_group(store, group)


def owners(store: str, group: str) -> dict[str, set[int]]:
    return {m.member_id: {p for _, p in m.assignment} for m in describe(store, group).members}


def delivery(final, collected: Collected, member: MemberProcess, store: str, group: str):
    """The delivery checker over the survivor (in this process) and the member process."""
    batches = collected_batches("survivor", collected, os.getpid())
    batches += journal_batches(member.name, member.batches())
    return check_delivery(final, batches, group_records(store, group))


@pytest.fixture
def setup(spark, bootstrap_servers, topic_name, group_store, tmp_path: Path):
    create_topic(bootstrap_servers, topic_name, PARTITIONS)

    def member(name: str, group: str, **kw) -> MemberProcess:
        return MemberProcess(
            tmp_path, name, bootstrap_servers=bootstrap_servers, topic=topic_name,
            group_id=group, group_store=group_store, **kw,
        )  # fmt: skip

    def survivor(group: str, **extra):
        collected = Collected()
        options = source_options(bootstrap_servers, topic_name, group, group_store, **extra)
        query = start_query(spark, options, str(tmp_path / f"{group}-survivor"), collected,
                            available_now=False)  # fmt: skip
        return query, collected

    producer = SteadyProducer(bootstrap_servers, topic_name, PARTITIONS)
    yield member, survivor, producer
    producer.stop()


def test_static_member_restarted_within_session_timeout_keeps_its_partitions(
    setup, group_store
) -> None:
    member, survivor, producer = setup
    group = "g-static"
    victim = member("static", group, instance_id="static-1", session_timeout_ms=90_000)
    victim.start()
    query, collected = survivor(group)
    try:
        wait_until(
            lambda: stable_with(group_store, group, 2, PARTITIONS), 180, "two stable members"
        )
        producer.start()
        wait_until(lambda: victim.records() and collected.count(), 60, "both reading")
        before = describe(group_store, group)
        static_before = next(m for m in before.members if m.instance_id == "static-1")
        survivor_before = next(m for m in before.members if m.instance_id is None)
        victim.kill()
        killed_at_ms = int(time.time() * 1000)
        victim.start()

        def rejoined() -> bool:
            info = describe(group_store, group)
            return any(
                m.instance_id == "static-1" and m.member_id != static_before.member_id
                for m in info.members
            )

        wait_until(rejoined, 120, "the restarted static member")
        rejoined_at = time.time()
        wait_until(lambda: victim.partitions(since=rejoined_at), 90, "the restarted member reading")
        time.sleep(2)
        after = describe(group_store, group)
    finally:
        producer.stop()
        query.stop()
        victim.stop()
    static_after = next(
        (m for m in after.members if m.instance_id == "static-1"),
        None,
    )
    assert static_after is not None, (
        [
            (r.kind, r.member_id, r.instance_id, r.generation, payload_of(r))
            for r in group_records(group_store, group)
            if r.kind not in (RecordKind.COMMIT, RecordKind.HEARTBEAT, RecordKind.SNAPSHOT)
        ],
        victim.output()[-3000:],
    )
    survivor_after = next(m for m in after.members if m.instance_id is None)
    assert after.generation == before.generation
    assert static_after.member_id != static_before.member_id, "a new incarnation"
    assert static_after.assignment == static_before.assignment
    assert survivor_after.assignment == survivor_before.assignment
    revokes = [
        r for r in group_records(group_store, group)
        if r.kind == RecordKind.REVOKE and r.member_id == survivor_before.member_id
        and r.timestamp_ms >= killed_at_ms
    ]  # fmt: skip
    assert revokes == [], "the survivor saw no revocation"


def test_paused_member_is_fenced_and_rejoins(setup, group_store) -> None:
    member, survivor, producer = setup
    group = "g-zombie"
    zombie = member("zombie", group, extra=["--option", "kafka.client.id=zombie"]).start()
    query, collected = survivor(group)
    try:
        wait_until(
            lambda: stable_with(group_store, group, 2, PARTITIONS), 180, "two stable members"
        )
        producer.start()
        wait_until(lambda: zombie.records() and collected.count(), 60, "both reading")
        old_id = next(
            m.member_id for m in describe(group_store, group).members if m.client_id == "zombie"
        )
        zombie.signal(signal.SIGSTOP)
        wait_until(
            lambda: stable_with(group_store, group, 1, PARTITIONS), 60, "the zombie's expiry"
        )
        time.sleep(2)
        zombie.signal(signal.SIGCONT)
        wait_until(
            lambda: stable_with(group_store, group, 2, PARTITIONS), 90, "the zombie's rejoin"
        )
        time.sleep(2)
        final = producer.stop()
        total = sum(final.values())
        wait_until(
            lambda: len(set(collected.records) | set(zombie.records())) >= total,
            90, "every produced record",
        )  # fmt: skip
        ids_after = set(owners(group_store, group))
    finally:
        producer.stop()
        query.stop()
        zombie.stop()
    result = delivery(final, collected, zombie, group_store, group)
    assert old_id not in ids_after, "the zombie rejoined as a new member"
    records = group_records(group_store, group)
    expired_at = next(
        i for i, r in enumerate(records) if r.kind == RecordKind.EXPIRE and r.member_id == old_id
    )
    late = [r for r in records[expired_at + 1 :] if r.member_id == old_id]
    assert late == [], f"no record of the expired member was accepted after its expiry: {late}"
    # Replaying the log from scratch refuses any partition held twice (GroupProtocolBug).
    replay(records, group)
    produced = {(p, o) for p, n in final.items() for o in range(n)}
    assert produced <= set(collected.records) | set(zombie.records()), "nothing lost"
    # contiguity, duplicates only as the zombie's uncommitted tail, no commit after its
    # EXPIRE, no double ownership (tests/delivery.py)
    result.assert_ok()


def test_restart_after_a_sigkill_replaces_its_member_and_replays_only_the_interrupted_batch(
    setup, group_store, topic_name
) -> None:
    member, _, producer = setup
    group = "g-restart"
    # Twice Kafka's default session timeout (45 s), which a member application's restart can
    # take on a loaded two-core machine: the restart must replace its member at once, never
    # after an expiry.
    alone = member("alone", group, session_timeout_ms=90_000).start()
    try:
        wait_until(lambda: stable_with(group_store, group, 1, PARTITIONS), 120, "the member")
        producer.start()
        wait_until(lambda: len(alone.batches()) >= 5, 90, "a few batches")
        (old,) = owners(group_store, group)
        alone.kill()  # mid-stream: its last batch may be neither committed nor in Spark's log
        killed_at = time.time()
        alone.start()  # same checkpoint, a new member id
        wait_until(lambda: alone.partitions(since=killed_at), 90, "reading again")
        took = min(b["time"] for b in alone.batches() if b["time"] > killed_at and b["records"])
        final = producer.stop()
        total = sum(final.values())
        wait_until(lambda: len(set(alone.records())) >= total, 90, "every produced record")
    finally:
        producer.stop()
        alone.stop()
    print(f"SIGKILL + restart on the checkpoint: reading {took - killed_at:.1f}s after the kill")
    # It replaced its previous incarnation (named in the checkpoint) instead of waiting for its
    # session timeout to expire it, and that incarnation's late commits are refused.
    records = group_records(group_store, group)
    assert any(r.kind == RecordKind.JOIN and JoinPayload.of(r).replaces == old for r in records)
    assert not any(r.kind == RecordKind.EXPIRE for r in records), (
        "it waited for the session timeout"
    )
    work = GroupLogClient(group_store, group, create=False).fold().fork()
    _, response = commit_offsets(
        work.group, old, work.group.generation, {TopicPartition(topic_name, 0): 0}, 0
    )
    assert response.error is GroupError.FENCED_INSTANCE_ID, response
    produced = {(p, o) for p, n in final.items() for o in range(n)}
    assert produced <= set(alone.records()), "nothing lost"
    # Spark re-runs the interrupted batch (same batch id, same range): an idempotent sink
    # keyed by batch id sees it once. Nothing else may be read twice: the restarted member
    # resumes the checkpoint instead of the (older) committed offsets.
    seen: dict[tuple[int, int], int] = {}
    for batch in alone.batches():
        for p, o in batch["records"]:
            first = seen.setdefault((p, o), batch["batch"])
            assert first == batch["batch"], f"{(p, o)} read in batches {first} and {batch['batch']}"


def test_restart_after_a_sigkill_between_batches_replaces_the_crashed_member_at_once(
    setup, group_store, bootstrap_servers, topic_name
) -> None:
    """A crash after the last batch completed (in Spark's commit log), then a restart on the
    checkpoint: the restart names its crashed incarnation and takes its place at once, with no
    EXPIRE, on every pyspark version the smoke suite runs (measured on 4.0.5 and 4.3)."""
    member, _, _ = setup
    group = "g-crash-idle"
    session_s = 45  # Kafka's default: well above a restart's own start-up on a loaded machine
    first = produce_sample(bootstrap_servers, topic_name, partitions=PARTITIONS, per_partition=3)
    alone = member("idle", group, session_timeout_ms=session_s * 1000).start()
    try:
        committed = {(topic_name, p): n for p, n in first.items()}
        wait_until(lambda: describe(group_store, group).committed == committed, 180, "commits")
        time.sleep(2)  # idle triggers: the last batch is complete, in Spark's log and ours
        (old,) = owners(group_store, group)
        alone.kill()
        killed_at = time.time()
        more = produce_sample(
            bootstrap_servers, topic_name, partitions=PARTITIONS, per_partition=3, start=3
        )
        alone.start()  # same checkpoint, a new member id
        total = sum(first.values()) + sum(more.values())
        wait_until(lambda: len(set(alone.records())) >= total, 120, "the records after the kill")
        took = min(b["time"] for b in alone.batches() if b["time"] > killed_at and b["records"])
    finally:
        alone.stop()
    version = "4.2+" if HAS_ADMISSION_CONTROL else "4.0/4.1"
    print(f"SIGKILL between batches + restart ({version}): reading {took - killed_at:.1f}s "
          f"after the kill (session timeout {session_s} s)")  # fmt: skip
    records = group_records(group_store, group)
    assert any(r.kind == RecordKind.JOIN and JoinPayload.of(r).replaces == old for r in records), (
        records
    )
    assert not any(r.kind == RecordKind.EXPIRE for r in records), (
        "the restart waited for the expiry"
    )
