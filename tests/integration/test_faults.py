"""Fault injection, checked by the delivery checker (tests/delivery.py).

Kafka's consumer bounce / static consumer bounce / fencing system tests and Jepsen's Kafka
checker on our product: real member processes (``tests/member_app.py``), a real broker, the
real group log. Every scenario prints the checker's one-line summary (run with ``-s`` to see it).

The dynamic bounce (three members, a random one SIGKILLed and restarted in turn) runs as a soak
only, with its graceful version (``churn``): in CI, members are killed by the member-process
tests (test_member_processes.py: the at-least-once bound of a killed member's batch) and the
exactly-once kill chains (test_exactly_once_delta*.py, test_jobs.py). The soaks are excluded by
default; run them with::

    .venv/bin/pytest -m soak -s tests/integration/test_faults.py

(``SOAK_SECONDS`` sets how long members are bounced, default 180.)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import spark_kafka_group
from spark_kafka_group.group import GroupCoordinator, GroupError
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.group.offsets import commit_offsets
from spark_kafka_group.group.payloads import JoinPayload, RevokePayload, SyncPayload
from spark_kafka_group.kafka import KafkaCluster
from spark_kafka_group.member import GroupLogClient
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.store import GroupLog, group_log_uri
from spark_kafka_group.testing.group_log import group_records
from spark_kafka_group.testing.kafka_broker import KafkaBroker
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until
from tests.delivery import Batch, check_delivery, collected_batches, journal_batches
from tests.groups import stable_with
from tests.processes import MemberProcess
from tests.streaming import Collected, source_options, start_query

pytestmark = [pytest.mark.spark, pytest.mark.broker]

PARTITIONS = 6


# -- helpers -------------------------------------------------------------------------------


def _commit_unfenced(tp: TopicPartition, offset: int) -> Callable[[GroupCoordinator, int], Any]:
    """A commit of ``offset`` outside any generation (as an admin's), for ``transact``."""
    return lambda work, now: commit_offsets(work.group, None, -1, {tp: offset}, now)


def reading_now(member: MemberProcess) -> bool:
    """The member's current process has journaled a batch with records."""
    pid = member.process.pid if member.process else None
    return any(b["pid"] == pid and b["records"] for b in member.batches())


def member_batches(members: list[MemberProcess]) -> list[Batch]:
    return [b for m in members for b in journal_batches(m.name, m.batches())]


def all_read(batches_fn, produced: dict[int, int]) -> bool:
    seen = {rec for b in batches_fn() for rec in b.records}
    return all((p, o) in seen for p, n in produced.items() for o in range(n))


def stop_all(members: list[MemberProcess]) -> None:
    for m in members:
        if m.process is not None and m.process.poll() is None:
            m.signal(signal.SIGKILL)
    for m in members:
        if m.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                m.process.wait(30)


def tree_digest(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``root`` (directories as ``<dir>``)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = "<dir>" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@contextlib.contextmanager
def unwritable(directory: Path) -> Iterator[None]:
    """Make ``directory`` refuse new files, even to root (``chattr +i``); always undone."""
    done = subprocess.run(["chattr", "+i", str(directory)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot make {directory} immutable (chattr +i): {done.stderr.strip()}")
    try:
        with pytest.raises(OSError):
            (directory / "probe").write_bytes(b"x")
        yield
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True)


def rejoined_after_expiry(records) -> list[str]:
    """Member ids that JOIN again after their own EXPIRE. A member expired while alive must
    rejoin as a new incarnation (a new id, as a Kafka consumer resets its member id), or
    its late commits under the old id would be accepted again (a bug these tests found)."""
    expired, again = set(), []
    for r in records:
        if r.kind == RecordKind.EXPIRE:
            expired.add(r.member_id)
        elif r.kind == RecordKind.JOIN and r.member_id in expired and r.member_id not in again:
            again.append(r.member_id)
    return again


# -- bounce --------------------------------------------------------------------------------


def bounce(
    tmp_path: Path,
    bootstrap_servers: str,
    topic: str,
    store: str,
    group: str,
    *,
    static: bool,
    rounds: int | None = None,
    duration_s: float | None = None,
    interval_s: float = 6.0,
    seed: int = 7,
    graceful: bool = False,
):
    """3 member processes, steady production; a random member SIGKILLed and restarted every
    ``interval_s`` (static: each member at most once per round of three; ``graceful``: stopped
    with SIGTERM, as a user stops a query, instead of killed). Returns the checker result, the
    group log and the time (ms) the group was first stable with all three."""
    create_topic(bootstrap_servers, topic, PARTITIONS)
    # Static: restarts must land inside the session timeout, and a member process takes
    # 15-40 s to start here, minutes when the 2-core machine is busy.
    session_ms = 240_000 if static else 6000
    members = [
        MemberProcess(
            tmp_path,
            f"m{i}",
            bootstrap_servers=bootstrap_servers,
            topic=topic,
            group_id=group,
            group_store=store,
            instance_id=f"m{i}" if static else None,
            session_timeout_ms=session_ms,
            # Slower triggers leave CPU to the restarting member: a Spark member takes 20 s
            # to start on an idle 2-core machine, minutes next to two busy ones.
            extra=["--trigger-ms", "2000"],
        )
        for i in range(3)
    ]
    producer = SteadyProducer(bootstrap_servers, topic, PARTITIONS, per_round=2, interval_s=0.3)
    rng = random.Random(seed)
    kills = 0
    try:
        for m in members:
            m.start()
        wait_until(lambda: stable_with(store, group, 3, PARTITIONS), 240, "three stable members")
        stable_ms = int(time.time() * 1000)
        producer.start()
        wait_until(lambda: all(reading_now(m) for m in members), 120, "all three reading")
        started = time.monotonic()
        while True:
            if rounds is not None and kills >= rounds:
                break
            if duration_s is not None and time.monotonic() - started >= duration_s:
                break
            time.sleep(interval_s)
            # Static: a different member each round, so that every restart is a new
            # incarnation that replaces a live one (restarts overlap, all inside the session).
            victim = members[kills % len(members)] if static else rng.choice(members)
            if graceful:
                victim.stop()
            else:
                victim.kill()
            victim.start()
            kills += 1
        wait_until(
            lambda: (
                stable_with(store, group, 3, PARTITIONS) and all(reading_now(m) for m in members)
            ),
            240, "the group stable with all three members again",
        )  # fmt: skip
        final = producer.stop()
        wait_until(lambda: all_read(lambda: member_batches(members), final), 120, "every record")
    finally:
        producer.stop()
        stop_all(members)
    records = group_records(store, group)
    stop = "stop (SIGTERM)" if graceful else "SIGKILL"
    print(f"bounce ({'static' if static else 'dynamic'}): {kills} {stop} + restart(s)")
    result = check_delivery(final, member_batches(members), records, topic=topic)
    return result, records, stable_ms


@pytest.mark.soak
def test_bounce_soak(tmp_path, bootstrap_servers, topic_name, group_store) -> None:
    duration = float(os.environ.get("SOAK_SECONDS", "180"))
    result, records, _ = bounce(
        tmp_path, bootstrap_servers, topic_name, group_store, "g-soak", static=False,
        duration_s=duration, interval_s=10.0, seed=int(time.time()),
    )  # fmt: skip
    print(f"soak ({duration:.0f}s of bouncing): {result.summary()}")
    result.assert_ok()
    assert rejoined_after_expiry(records) == []


@pytest.mark.soak
def test_churn_soak(tmp_path, bootstrap_servers, topic_name, group_store) -> None:
    """Queries stopped and restarted on their checkpoints, one every 12 s for ``SOAK_SECONDS``
    under steady production: every handover is a commit and a LEAVE, so nothing may be read
    twice (a SIGKILL's last uncommitted batch is the only legal duplicate, and there is none)."""
    duration = float(os.environ.get("SOAK_SECONDS", "180"))
    result, records, _ = bounce(
        tmp_path, bootstrap_servers, topic_name, group_store, "g-churn", static=False,
        duration_s=duration, interval_s=12.0, seed=int(time.time()), graceful=True,
    )  # fmt: skip
    print(f"churn ({duration:.0f}s of restarts): {result.summary()}")
    result.assert_ok()
    assert result.duplicated == 0, result.details()
    assert rejoined_after_expiry(records) == []


def test_static_bounce(tmp_path, bootstrap_servers, topic_name, group_store) -> None:
    result, records, stable_ms = bounce(
        tmp_path, bootstrap_servers, topic_name, group_store, "g-static-bounce", static=True,
        rounds=2, interval_s=3.0,
    )  # fmt: skip
    result.assert_ok()
    after = [r for r in records if r.timestamp_ms >= stable_ms]
    # Each restart joins as its instance's new incarnation (``replaces`` the old member id).
    joins = [(r, JoinPayload.of(r)) for r in after if r.kind == RecordKind.JOIN]
    restarts = [(r.member_id, join.replaces) for r, join in joins if join.replaces]
    assert len(restarts) == 2, restarts
    # Any other JOIN is a known member rejoining a rebalance (a restarted leader starts one),
    # never a new member: no static instance ever lost its place in the group.
    known = {
        r.member_id for r in records if r.kind == RecordKind.JOIN and r.timestamp_ms < stable_ms
    }
    known |= {mid for mid, _ in restarts}
    newcomers = [r.member_id for r, join in joins if not join.replaces and r.member_id not in known]
    assert newcomers == [], f"static restarts joined as new members: {newcomers}"
    # No revocation at all (a restarted leader's rejoin starts a rebalance, KIP-345, but
    # cooperative-sticky gives everyone the same partitions back).
    revokes = [
        (r.member_id, RevokePayload.of(r).partitions) for r in after if r.kind == RecordKind.REVOKE
    ]
    assert revokes == [], f"static restarts revoked partitions: {revokes}"
    expired = [r.member_id for r in after if r.kind in (RecordKind.EXPIRE, RecordKind.LEAVE)]
    assert expired == []
    before = [r for r in records if r.kind == RecordKind.SYNC and r.timestamp_ms < stable_ms][-1:]
    syncs = [SyncPayload.of(r).assignment for r in before + after if r.kind == RecordKind.SYNC]
    by_instance = {r.member_id: r.instance_id for r in records if r.kind == RecordKind.JOIN}
    shapes = {
        frozenset((by_instance[m], tuple(sorted(a))) for m, a in sync.items()) for sync in syncs
    }
    assert len(shapes) <= 1, f"static restarts moved partitions: {shapes}"


# -- store trouble -------------------------------------------------------------------------


def run_queries(spark, bootstrap_servers, topic, group, store, tmp_path, names, **extra):
    queries = []
    for name in names:
        collected = Collected()
        options = source_options(bootstrap_servers, topic, group, store, **extra)
        query = start_query(
            spark, options, str(tmp_path / f"{name}-ckpt"), collected, available_now=False
        )
        queries.append((name, query, collected))
    return queries


def check_alive(queries) -> bool:
    for name, query, _ in queries:
        assert query.isActive, f"query {name} failed: {query.exception()}"
    return True


def stop_queries(queries) -> None:
    for _, query, _ in queries:
        query.stop()


def query_batches(queries) -> list[Batch]:
    return [b for name, _, c in queries for b in collected_batches(name, c, pid=os.getpid())]


def test_store_unwritable_for_a_while(
    spark, bootstrap_servers, topic_name, group_store, tmp_path
) -> None:
    partitions, group = 4, "g-store-down"
    create_topic(bootstrap_servers, topic_name, partitions)
    # One member in the test's Spark session (a second one would only add load here).
    queries = run_queries(
        spark, bootstrap_servers, topic_name, group, group_store, tmp_path, ["q1"],
        sessionTimeoutMs=10000,
    )  # fmt: skip
    producer = SteadyProducer(bootstrap_servers, topic_name, partitions, per_round=2)
    log_dir = Path(group_store) / group / "_delta_log"
    try:
        wait_until(
            lambda: check_alive(queries) and stable_with(group_store, group, 1, partitions),
            120, "a stable member",
        )  # fmt: skip
        producer.start()
        wait_until(lambda: all(c.count() for _, _, c in queries), 60, "reading")
        with unwritable(log_dir):
            time.sleep(0.5)  # an append already past its rename has landed by now
            version_before = GroupLog.open(group_log_uri(group_store, group)).latest_version()
            counts = [c.count() for _, _, c in queries]
            time.sleep(5)  # below the 10 s session timeout: nobody is expired meanwhile
            grew = [c.count() > n for (_, _, c), n in zip(queries, counts, strict=True)]
            version_during = GroupLog.open(group_log_uri(group_store, group)).latest_version()
        assert all(grew), "members keep consuming what they own"
        assert version_during == version_before, "nothing was written while unwritable"
        final = producer.stop()

        def caught_up() -> bool:
            offsets = spark_kafka_group.describe_group(group_store, group).committed
            committed = {tp[1]: o for tp, o in dict(offsets).items()}
            return all(committed.get(p) == n for p, n in final.items())

        wait_until(caught_up, 90, "the commits to catch up")
    finally:
        producer.stop()
        stop_queries(queries)
    records = group_records(group_store, group)
    result = check_delivery(final, query_batches(queries), records, topic=topic_name)
    result.assert_ok()
    assert result.duplicated == 0
    assert [r for r in records if r.kind == RecordKind.EXPIRE] == [], "nobody expired meanwhile"


def test_commit_conflict_storm(tmp_path: Path) -> None:
    """8 writers commit at once through GroupLogClient.transact and the protocol's commit
    handler (admin commits of an Empty group); every accepted commit lands, in order, once."""
    store, group, writers, commits = str(tmp_path / "groups"), "g-storm", 8, 8
    GroupLog.open(group_log_uri(store, group))  # nothing yet: the first append creates it
    start = threading.Barrier(writers)
    outcomes: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def writer(partition: int) -> None:
        try:
            client = GroupLogClient(store, group)
            accepted = []
            start.wait(30)
            for offset in range(1, commits + 1):

                def decide(work: GroupCoordinator, now: int, offset: int = offset):
                    return commit_offsets(
                        work.group, None, -1, {TopicPartition("t", partition): offset}, now
                    )

                response = client.transact(decide)
                assert response.partition_errors, response
                assert all(e is GroupError.NONE for e in response.partition_errors.values())
                accepted.append(offset)
            outcomes[partition] = accepted
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(p,)) for p in range(writers)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    log = GroupLog.open(group_log_uri(store, group), create=False)
    rows = log.read()
    commit_rows = [(v, r) for v, r in rows if r.kind == RecordKind.COMMIT]
    landed = sorted((r.partition, r.offset) for _, r in commit_rows)
    assert landed == sorted((p, o) for p, os_ in outcomes.items() for o in os_), "lost updates"
    assert len(landed) == writers * commits
    versions = [v for v, _ in commit_rows]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    for p in range(writers):
        assert [r.offset for _, r in commit_rows if r.partition == p] == list(range(1, commits + 1))
    final = spark_kafka_group.describe_group(store, group).committed
    assert {tp[1]: o for tp, o in dict(final).items()} == dict.fromkeys(range(writers), commits)
    print(
        f"commit storm: {writers} writers x {commits} commits landed in "
        f"{time.monotonic() - began:.1f}s as {len(versions)} versions"
    )


# -- broker trouble ------------------------------------------------------------------------


def _log_ends(servers: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's high watermark: how many records it holds (from offset 0)."""
    with KafkaCluster(servers) as cluster:
        ends = cluster.latest_offsets(TopicPartition(topic, p) for p in range(partitions))
    return {tp.partition: end for tp, end in ends.items()}


def test_broker_paused(spark, topic_name, group_store, tmp_path) -> None:
    """SIGSTOP a dedicated Apache Kafka broker for 10 s: the query waits, then carries on with
    nothing lost, and the group does not notice (the group store was reachable all along)."""
    partitions, group = 3, "g-broker-pause"
    with KafkaBroker() as broker:
        servers = broker.bootstrap_servers
        create_topic(servers, topic_name, partitions)
        produced = produce_sample(servers, topic_name, partitions=partitions, per_partition=20)
        collected = Collected()
        options = source_options(servers, topic_name, group, group_store)
        query = start_query(spark, options, str(tmp_path / "ckpt"), collected, available_now=False)
        try:
            wait_until(lambda: collected.count() >= sum(produced.values()), 120, "first records")
            assert broker.pid is not None
            os.kill(broker.pid, signal.SIGSTOP)
            try:
                time.sleep(10)
                assert query.isActive, f"the query failed: {query.exception()}"
            finally:
                os.kill(broker.pid, signal.SIGCONT)
            produce_sample(servers, topic_name, partitions=partitions, per_partition=20, start=20)
            # What the topic holds: a produce request the resumed broker answered late is sent
            # again by the (non-idempotent) test producer, and then lands twice.
            produced = _log_ends(servers, topic_name, partitions)
            wait_until(
                lambda: collected.count() >= sum(produced.values()) or not query.isActive,
                120, "the records produced after the pause",
            )  # fmt: skip
            assert query.isActive, f"the query failed: {query.exception()}"
        finally:
            query.stop()
        records = group_records(group_store, group)
    result = check_delivery(
        produced, collected_batches("q", collected, os.getpid()), records, topic=topic_name
    )
    result.assert_ok()
    # The member kept heartbeating through the outage: topic metadata comes from a cache
    # refreshed on its own thread, never fetched under the member lock (a bug this found).
    expired = [r.member_id for r in records if r.kind == RecordKind.EXPIRE]
    assert expired == [], f"a broker outage expired a healthy member: {expired}"


def test_topic_deleted_under_a_running_query(
    spark, bootstrap_servers, topic_name, group_store, tmp_path
) -> None:
    from confluent_kafka.admin import AdminClient

    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        pytest.skip("deletes a topic: only on the suite's own broker")
    create_topic(bootstrap_servers, topic_name, 2)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=10)
    collected = Collected()
    options = source_options(bootstrap_servers, topic_name, "g-deleted", group_store)
    query = start_query(spark, options, str(tmp_path / "ckpt"), collected, available_now=False)
    try:
        wait_until(lambda: collected.count() >= sum(produced.values()), 120, "the records")
        admin = AdminClient({"bootstrap.servers": bootstrap_servers})
        for future in admin.delete_topics([topic_name], operation_timeout=10).values():
            future.result(15)
        with contextlib.suppress(Exception):  # awaitTermination raises the query's error
            query.awaitTermination(90)
        assert query.exception() is not None, "the query noticed the deleted topic"
        error = str(query.exception())
    finally:
        query.stop()
    assert topic_name in error, error[:2000]
    print(f"topic deleted: {error.splitlines()[0][:300]}")


# -- bad input -----------------------------------------------------------------------------


def failed_query(spark, options, checkpoint: str) -> str:
    """Start an AvailableNow query with ``options``; the error it fails with (as text)."""
    collected = Collected()
    try:
        query = start_query(spark, options, checkpoint, collected)
    except Exception as exc:  # refused at start
        return str(exc)
    try:
        with contextlib.suppress(Exception):  # awaitTermination raises the query's error
            assert query.awaitTermination(120), "the query did not fail"
        assert query.exception() is not None, "the query did not fail"
        return str(query.exception())
    finally:
        query.stop()


def test_bad_group_store_contents_fail_clearly_and_are_left_untouched(
    spark, bootstrap_servers, topic_name, group_store, tmp_path
) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    create_topic(bootstrap_servers, topic_name, 1)
    store = Path(group_store)
    # garbage directory
    (store / "g-garbage").mkdir(parents=True)
    (store / "g-garbage" / "notes.txt").write_text("not a group log")
    # a foreign Delta table
    write_deltalake(str(store / "g-foreign"), pa.table({"id": [1, 2], "name": ["a", "b"]}))
    # a group log with a middle commit missing (no checkpoint covers it)
    log = GroupLog.open(group_log_uri(group_store, "g-truncated"))
    client = GroupLogClient(group_store, "g-truncated")
    for offset in range(1, 6):
        client.transact(_commit_unfenced(TopicPartition(topic_name, 0), offset))
    assert log.latest_version() == 4
    (store / "g-truncated" / "_delta_log" / f"{2:020d}.json").unlink()

    before = tree_digest(store)
    cases = {
        "g-garbage": ["g-garbage", "not a Delta table", "notes.txt", "left untouched"],
        "g-foreign": ["g-foreign", "not a spark-kafka-group group log", "left untouched"],
        "g-truncated": ["g-truncated", "corrupted", "restore it from a backup"],
    }
    for group, expected in cases.items():
        options = source_options(bootstrap_servers, topic_name, group, group_store)
        error = failed_query(spark, options, str(tmp_path / f"{group}-ckpt"))
        missing = [e for e in expected if e not in error]
        assert not missing, (group, missing, error[:3000])
        assert "direct cause of the following exception" not in error, error[:3000]
        print(f"{group}: {next(line for line in error.splitlines() if group in line)[:300]}")
    assert tree_digest(store) == before, "the group store was changed"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"startingOffset": "earliest"}, ["Unknown option", "startingOffsets"]),
        ({"kafka.group.id": "g"}, ["kafka.group.id", "groupId"]),
        ({"sessionTimeoutMs": "soon"}, ["sessionTimeoutMs", "whole number"]),
        ({"subscribePattern": "t.*"}, ["'subscribe'", "'subscribePattern'"]),
    ],
    ids=["typo", "kafka.group.id", "not a number", "two subscriptions"],
)
def test_bad_options_fail_clearly_and_write_nothing(
    spark, bootstrap_servers, topic_name, group_store, tmp_path, extra, expected
) -> None:
    create_topic(bootstrap_servers, topic_name, 1)
    options = source_options(bootstrap_servers, topic_name, "g-bad-options", group_store, **extra)
    error = failed_query(spark, options, str(tmp_path / "ckpt"))
    missing = [e for e in expected if e not in error]
    assert not missing, (missing, error[:3000])
    assert not Path(group_store).exists() or not any(Path(group_store).iterdir())
