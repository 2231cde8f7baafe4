"""The ``kafka-group`` CLI against real Delta group logs and a real broker (embedded Tansu, or
$KAFKA_BOOTSTRAP_SERVERS). Groups are built by driving the protocol handlers the way members
do (:class:`GroupDriver`), without Spark (the source options ``importFromKafkaGroup`` and
``commitToKafka``, which run a query: test_commit_to_kafka.py)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka.cluster import KafkaCluster
from spark_kafka_group.kafka.consumer_group_offsets import (
    KafkaOffsetMirror,
    commit_to_kafka_group,
    kafka_group_offsets,
    seed_from_kafka_group,
)
from spark_kafka_group.kafka.java_settings import JKS_MAGIC
from spark_kafka_group.ops.admin import GroupNotEmptyError, describe_group, reset_offsets
from spark_kafka_group.options import parse_options
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.store.leases import LeaseFiles
from spark_kafka_group.store.paths import list_dir
from tests.integration.cli_support import GroupDriver, run_cli
from tests.object_stores import STORE_KINDS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _kafka_offsets(servers: str, group: str, partitions=None) -> dict:
    with KafkaCluster(servers) as cluster:
        return kafka_group_offsets(cluster, group, partitions)


def _commit_to_kafka(servers: str, group: str, offsets: dict) -> dict:
    with KafkaCluster(servers) as cluster:
        return commit_to_kafka_group(cluster, group, offsets)


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def _three_generations(store: str, group: str, topic: str) -> GroupDriver:
    """A joins (gen 1), B joins (gen 2), both commit, B leaves (gen 3): A is live at the end."""
    d = GroupDriver(store, group, {topic: 3})
    d.rebalance(["A"])
    d.commit("A", {(topic, 0): 2, (topic, 1): 3, (topic, 2): 4})
    d.step(2_000)
    d.rebalance(["B", "A"])
    d.commit("B", dict.fromkeys(d.assignment("B"), 6))
    d.step(2_000)
    d.leave("B")
    d.rebalance(["A"])
    d.commit("A", {(topic, 0): 5})
    return d


# -- without a broker --------------------------------------------------------------------------


def test_list_and_describe_text_and_json(group_store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)  # no cluster: no lag
    group = _group()
    _three_generations(group_store, group, "orders")

    listed = run_cli("list", "--store", group_store, "--json")
    assert listed.code == 0, listed.err
    [row] = listed.json()["groups"]
    assert (row["group"], row["state"], row["members"], row["generation"]) == (
        group,
        "Stable",
        1,
        3,
    )
    assert group in run_cli("list", "--store", group_store).out

    described = run_cli("describe", "--store", group_store, "--group", group, "--json")
    assert described.code == 0, described.err
    d = described.json()
    assert (d["state"], d["generation"], d["protocol"], d["leader"]) == ("Stable", 3, "range", "A")
    [member] = d["members"]
    assert member["member_id"] == "A" and member["live"]
    assert member["assigned"] == ["orders-0", "orders-1", "orders-2"]
    assert member["last_heartbeat_age_ms"] >= 0
    committed = {(p["topic"], p["partition"]): p["committed"] for p in d["partitions"]}
    assert committed == {("orders", 0): 5, ("orders", 1): 3, ("orders", 2): 6}
    assert {p["owner"] for p in d["partitions"]} == {"A"}
    assert all(p["lag"] is None for p in d["partitions"])  # no --bootstrap-servers

    # Kafka's columns, one row per partition, "-" where there is no value (no cluster given).
    text = run_cli("describe", "--store", group_store, "--group", group)
    header, *rows = text.out.strip("\n").splitlines()
    assert header.split() == [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
        "CONSUMER-ID", "HOST", "CLIENT-ID",
    ]  # fmt: skip
    assert sorted(r.split()[:6] for r in rows) == [
        [group, "orders", "0", "5", "-", "-"],
        [group, "orders", "1", "3", "-", "-"],
        [group, "orders", "2", "6", "-", "-"],
    ]
    assert {tuple(r.split()[6:8]) for r in rows} == {("A", "test-host")}
    assert "--bootstrap-server" in text.err


def test_a_member_silent_in_the_log_but_renewing_its_lease_is_live(group_store: str) -> None:
    """Members with leases write no heartbeat records: describe and reset-offsets read the
    leases, or they would take a running member for an expired one."""
    group = _group()
    d = GroupDriver(group_store, group, {"t": 2}, session_timeout_ms=30_000, start_ago_ms=60_000)
    d.rebalance(["A"])  # A's last record is about a minute old, twice its session timeout
    silent = describe_group(group_store, group)
    assert [(m.member_id, m.live) for m in silent.members] == [("A", False)]

    LeaseFiles(d.client.uri).renew("A", int(time.time() * 1000))
    (member,) = describe_group(group_store, group).members
    assert member.live
    with pytest.raises(GroupNotEmptyError, match="live members"):
        reset_offsets(group_store, group, {TopicPartition("t", 0): 0}, execute=True)
    assert [m.member_id for m in describe_group(group_store, group).members] == ["A"]


def test_errors_are_messages_with_exit_codes(group_store: str) -> None:
    _three_generations(group_store, "present", "t")
    missing = run_cli("describe", "--store", group_store, "--group", "absent")
    assert missing.code == 1
    assert "no group log for group 'absent'" in missing.err and "present" in missing.err
    assert "Traceback" not in missing.err

    bad_mode = run_cli(
        "reset-offsets", "--store", group_store, "--group", "present", "--topic", "t"
    )
    assert bad_mode.code == 2  # one of --to-earliest ... is required

    timeline = run_cli("timeline", "--store", group_store, "--group", "absent", "--out", "x.png")
    assert timeline.code == 1 and "no group log" in timeline.err

    assert run_cli("list", "--store", group_store + "/nothing-here").out.startswith("No groups")


def test_without_store_the_cli_finds_what_the_source_created_with_default_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source's store from $SPARK_KAFKA_GROUP_STORE (no groupStore option) is the CLI's
    default too."""
    monkeypatch.setenv("SPARK_KAFKA_GROUP_STORE", str(tmp_path / "shared"))
    empty = run_cli("list")
    assert empty.code == 0, empty.err
    assert empty.out.startswith("No groups in store ") and str(tmp_path / "shared") in empty.out

    options = parse_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t", "groupId": "g"})
    _three_generations(options.group.store, "g", "t")
    described = run_cli("describe", "--group", "g", "--json")
    assert described.code == 0, described.err
    assert described.json()["group_id"] == "g"
    assert "g" in run_cli("list").out

    monkeypatch.setenv("SPARK_KAFKA_GROUP_STORE", str(tmp_path / "elsewhere"))
    assert run_cli("describe", "--group", "g").code == 1  # the environment wins, in both


def test_timeline_png_and_summary(group_store: str, tmp_path) -> None:
    group = _group()
    _three_generations(group_store, group, "clicks")
    out = tmp_path / "timeline.png"

    result = run_cli(
        "timeline", "--store", group_store, "--group", group, "--out", str(out), "--json"
    )
    assert result.code == 0, result.err
    data = out.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 10_000
    summary = result.json()
    assert summary["png_bytes"] == len(data)
    assert [r["generation"] for r in summary["rebalances"]] == [1, 2, 3]
    assert [len(r["members"]) for r in summary["rebalances"]] == [1, 2, 1]
    assert summary["rebalances"][2]["reason"] == "test leave"
    assert {m["member_id"] for m in summary["members"]} == {"A", "B"}
    owners = {
        (p["partition"]): [o["member_id"] for o in p["owners"]] for p in summary["partitions"]
    }
    moved = [p for p, who in owners.items() if who == ["A", "B", "A"]]
    assert len(moved) == 1  # one partition went to B in generation 2 and back to A in 3
    assert summary["commits"] == 5

    text = run_cli("timeline", "--store", group_store, "--group", group, "--out", str(out))
    assert text.code == 0 and "generation 2" in text.out


# -- with a broker -----------------------------------------------------------------------------


@pytest.mark.broker
def test_describe_lag_is_produced_minus_committed(
    bootstrap_servers: str, topic_name: str, group_store: str
) -> None:
    create_topic(bootstrap_servers, topic_name, 3)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=3, per_partition=20)
    group = _group()
    d = GroupDriver(group_store, group, {topic_name: 3})
    d.rebalance(["A"])
    committed = {(topic_name, 0): 5, (topic_name, 1): 21}
    d.commit("A", committed)

    result = run_cli(
        "describe",
        "--store",
        group_store,
        "--group",
        group,
        "--bootstrap-servers",
        bootstrap_servers,
        "--json",
    )
    assert result.code == 0, result.err
    rows = {p["partition"]: p for p in result.json()["partitions"]}
    assert set(rows) == {0, 1, 2}  # partition 2: assigned, never committed
    for p, row in rows.items():
        assert row["log_end"] == produced[p]
        expected = produced[p] - committed[(topic_name, p)] if p in (0, 1) else None
        assert row["lag"] == expected
    assert result.json()["total_lag"] == (produced[0] - 5) + (produced[1] - 21)


@pytest.mark.broker
def test_reset_offsets_refused_while_members_live_then_applied(
    bootstrap_servers: str, topic_name: str, group_store: str
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=10)
    group = _group()
    d = GroupDriver(group_store, group, {topic_name: 2})
    d.rebalance(["live-member"])
    d.commit("live-member", {(topic_name, 0): 4, (topic_name, 1): 6})
    base = ["--store", group_store, "--group", group, "--bootstrap-servers", bootstrap_servers]

    refused = run_cli("reset-offsets", *base, "--topic", topic_name, "--to-earliest", "--execute")
    assert refused.code == 1
    assert "live members" in refused.err and "live-member" in refused.err
    plan_refused = run_cli("reset-offsets", *base, "--topic", topic_name, "--to-earliest")
    assert plan_refused.code == 1 and "live-member" in plan_refused.err

    d.leave("live-member")
    assert describe_group(group_store, group).state == "Empty"

    plan = run_cli("reset-offsets", *base, "--topic", topic_name, "--shift-by", "-3", "--json")
    assert plan.code == 0, plan.err
    assert not plan.json()["executed"]
    assert [(p["partition"], p["current"], p["new"]) for p in plan.json()["partitions"]] == [
        (0, 4, 1),
        (1, 6, 3),
    ]
    assert describe_group(group_store, group).committed == {(topic_name, 0): 4, (topic_name, 1): 6}
    assert (
        "add --execute" in run_cli("reset-offsets", *base, "--topic", topic_name, "--to-latest").err
    )

    done = run_cli(
        "reset-offsets", *base, "--topic", f"{topic_name}:1", "--to-offset", "999", "--execute",
        "--json",
    )  # fmt: skip
    assert done.code == 0, done.err
    [row] = done.json()["partitions"]
    assert (row["partition"], row["new"], row["requested"]) == (1, produced[1], 999)  # clamped
    assert describe_group(group_store, group).committed == {
        (topic_name, 0): 4,
        (topic_name, 1): produced[1],
    }

    earliest = run_cli("reset-offsets", *base, "--topic", topic_name, "--to-earliest", "--execute")
    assert earliest.code == 0, earliest.err
    assert describe_group(group_store, group).committed == {(topic_name, 0): 0, (topic_name, 1): 0}

    by_time = run_cli(
        "reset-offsets", *base, "--topic", topic_name, "--to-datetime", "2000-01-01T00:00:00Z",
        "--json",
    )  # fmt: skip
    assert by_time.code == 0, by_time.err
    assert all(0 <= p["new"] <= produced[p["partition"]] for p in by_time.json()["partitions"])

    unknown = run_cli("reset-offsets", *base, "--topic", "no-such-topic", "--to-earliest")
    assert unknown.code == 1 and "no-such-topic" in unknown.err


@pytest.mark.broker
def test_unreachable_broker_is_a_clear_error(group_store: str) -> None:
    _three_generations(group_store, "g", "t")
    result = run_cli(
        "describe", "--store", group_store, "--group", "g", "--bootstrap-servers", "127.0.0.1:1"
    )
    assert result.code == 1
    assert "did not answer" in result.err and "127.0.0.1:1" in result.err
    assert "Traceback" not in result.err


def test_command_config_java_settings_are_translated_or_refused(
    group_store: str, tmp_path: Path
) -> None:
    """--command-config goes through the same translation as the source's kafka.* options."""
    _three_generations(group_store, "g", "t")
    trust = tmp_path / "client.truststore"
    trust.write_bytes(JKS_MAGIC + b"\x00\x00\x00\x02")  # a JKS file starts so
    config = tmp_path / "client.properties"
    config.write_text(f"security.protocol=SSL\nssl.truststore.location={trust}\n")
    result = run_cli(
        *("describe", "--store", group_store, "--group", "g"),
        *("--bootstrap-servers", "127.0.0.1:1", "--command-config", str(config)),
    )
    assert result.code == 2, result.err
    assert f"ssl.truststore.location = '{trust}' is a JKS trust store" in result.err
    assert "keytool -importkeystore" in result.err and "ssl.ca.location" in result.err
    assert "Traceback" not in result.err


def _first_offsets(bootstrap_servers: str, group: str, topic: str, n: int) -> dict[int, int]:
    """Where a plain consumer subscribed in Kafka group ``group`` starts on each partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # Tansu: a subscription with librdkafka's default "range,roundrobin" gets no
            # assignment; "range" alone works (see the report).
            "partition.assignment.strategy": "range",
        }
    )
    consumer.subscribe([topic])
    first: dict[int, int] = {}
    deadline = time.monotonic() + 60
    try:
        while len(first) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                first.setdefault(partition, offset)
    finally:
        consumer.close()
    return first


@pytest.mark.broker
def test_export_to_kafka_then_a_plain_consumer_starts_there(
    bootstrap_servers: str, topic_name: str, group_store: str
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=10)
    group, kafka_group = _group(), f"kafka-{uuid.uuid4().hex[:8]}"
    d = GroupDriver(group_store, group, {topic_name: 2})
    d.rebalance(["A"])
    d.commit("A", {(topic_name, 0): 3, (topic_name, 1): 7})
    base = ["--store", group_store, "--group", group, "--bootstrap-servers", bootstrap_servers]

    dry = run_cli("export-to-kafka", *base, "--kafka-group", kafka_group, "--dry-run", "--json")
    assert dry.code == 0 and dry.json()["exported"] == 0
    assert _kafka_offsets(bootstrap_servers, kafka_group) == {}

    result = run_cli("export-to-kafka", *base, "--kafka-group", kafka_group, "--json")
    assert result.code == 0, result.err
    assert result.json()["exported"] == 2
    assert _kafka_offsets(bootstrap_servers, kafka_group) == {
        (topic_name, 0): 3,
        (topic_name, 1): 7,
    }
    assert _first_offsets(bootstrap_servers, kafka_group, topic_name, 2) == {0: 3, 1: 7}


@pytest.mark.broker
def test_kafka_offset_functions(bootstrap_servers: str, topic_name: str) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=5)
    kafka_group = f"kafka-{uuid.uuid4().hex[:8]}"
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)

    assert _commit_to_kafka(bootstrap_servers, kafka_group, {tp0: 2}) == {tp0: 2}
    assert _kafka_offsets(bootstrap_servers, kafka_group, [tp0, tp1]) == {tp0: 2}
    with KafkaCluster(bootstrap_servers) as cluster:
        seeded = seed_from_kafka_group(
            {tp1: 4}, [tp0, tp1], cluster=cluster, kafka_group=kafka_group
        )
        assert seeded == {tp0: 2, tp1: 4}  # the group log's offset wins where it has one

        mirror = KafkaOffsetMirror(cluster, kafka_group)
        mirror.commit({tp0: 5, tp1: 6})
        mirror.commit({tp0: 5, tp1: 6})  # unchanged: not sent again once acknowledged
        assert mirror.flush(20)
        assert kafka_group_offsets(cluster, kafka_group) == {tp0: 5, tp1: 6}
        assert mirror.failures == 0 and mirror.commits >= 1
        mirror.close()
        # The mirror does not own the client: the reader (or here, the test) closes it.
        assert kafka_group_offsets(cluster, kafka_group, [tp0]) == {tp0: 5}

    with KafkaCluster("127.0.0.1:1", attempt_timeout_s=1.0) as down_cluster:
        down = KafkaOffsetMirror(down_cluster, kafka_group)
        down.commit({tp0: 1})  # returns at once, never raises
        assert down.flush(20)
        assert down.failures == 1 and down.last_error


@pytest.mark.broker
def test_import_from_kafka_refuses_live_members_and_dry_runs(
    bootstrap_servers: str, topic_name: str, group_store: str
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=5)
    kafka_group = f"kafka-{uuid.uuid4().hex[:8]}"
    _commit_to_kafka(bootstrap_servers, kafka_group, {TopicPartition(topic_name, 0): 1})
    group = _group()
    base = ["--store", group_store, "--group", group, "--bootstrap-servers", bootstrap_servers]

    nothing = run_cli("import-from-kafka", *base, "--kafka-group", "never-committed")
    assert nothing.code == 1 and "no committed offsets" in nothing.err

    dry = run_cli("import-from-kafka", *base, "--kafka-group", kafka_group, "--dry-run", "--json")
    assert dry.code == 0, dry.err
    assert dry.json()["partitions"] == [
        {"topic": topic_name, "partition": 0, "current": None, "new": 1}
    ]
    assert describe_group(group_store, group).version == -1  # nothing written

    d = GroupDriver(group_store, group, {topic_name: 2})
    d.rebalance(["A"])
    refused = run_cli("import-from-kafka", *base, "--kafka-group", kafka_group)
    assert refused.code == 1 and "live members" in refused.err


@pytest.mark.broker
@pytest.mark.spark
def test_import_from_kafka_then_a_query_starts_there(
    spark, bootstrap_servers: str, topic_name: str, group_store: str, tmp_path
) -> None:
    from tests.streaming import expected_records, run_available_now, source_options

    create_topic(bootstrap_servers, topic_name, 2)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=10)
    kafka_group = f"legacy-{uuid.uuid4().hex[:8]}"
    # A plain Kafka consumer application committed these.
    _commit_to_kafka(
        bootstrap_servers,
        kafka_group,
        {TopicPartition(topic_name, 0): 4, TopicPartition(topic_name, 1): 9},
    )
    group = _group()
    result = run_cli(
        "import-from-kafka",
        "--store",
        group_store,
        "--group",
        group,
        "--kafka-group",
        kafka_group,
        "--bootstrap-servers",
        bootstrap_servers,
        "--json",
    )
    assert result.code == 0, result.err
    assert describe_group(group_store, group).committed == {
        (topic_name, 0): 4,
        (topic_name, 1): 9,
    }
    lag = run_cli(
        "describe", "--store", group_store, "--group", group,
        "--bootstrap-servers", bootstrap_servers, "--json",
    )  # fmt: skip
    assert lag.json()["total_lag"] == produced[0] - 4 + produced[1] - 9

    options = source_options(bootstrap_servers, topic_name, group, group_store)
    collected = run_available_now(spark, options, str(tmp_path / "checkpoint"))
    start = {0: 4, 1: 9}
    counts = {p: n - start[p] for p, n in produced.items()}
    assert collected.records == expected_records(counts, start)

    after = run_cli(
        "describe", "--store", group_store, "--group", group,
        "--bootstrap-servers", bootstrap_servers, "--json",
    )  # fmt: skip
    assert after.json()["total_lag"] == 0


def test_delete_refused_while_members_live_then_the_group_is_gone(
    group_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    group, other = _group(), _group()
    d = GroupDriver(group_store, group, {"t": 2})
    d.rebalance(["live-member"])
    d.commit("live-member", {("t", 0): 4, ("t", 1): 6})
    LeaseFiles(d.client.uri).renew("live-member", int(time.time() * 1000))
    _three_generations(group_store, other, "t")
    base = ["--store", group_store, "--group", group]

    def listed() -> list[str]:
        return [
            g["group"] for g in run_cli("list", "--store", group_store, "--json").json()["groups"]
        ]

    refused = run_cli("delete", *base, "--yes")
    assert refused.code == 1, refused.err
    assert "live members" in refused.err and "live-member" in refused.err
    assert "Traceback" not in refused.err
    assert sorted(listed()) == sorted([group, other])

    d.leave("live-member")
    unconfirmed = run_cli("delete", *base)  # stdin is not a terminal under pytest
    assert unconfirmed.code == 2 and "--yes" in unconfirmed.err
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    declined = run_cli("delete", *base)
    assert declined.code == 1 and "not deleted" in declined.out
    assert group in listed()

    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    deleted = run_cli("delete", *base, "--json")
    assert deleted.code == 0, deleted.err
    assert deleted.json()["deleted"] and deleted.json()["committed_offsets"] == 2
    assert listed() == [other]
    assert not (Path(group_store) / group).exists()  # the table, its leases and probes
    assert describe_group(group_store, other).state == "Stable"  # the other group is untouched

    again = run_cli("delete", *base, "--yes")
    assert again.code == 1 and "no group log" in again.err


# Not "s3": on SeaweedFS the listing still shows the directories (_delta_log, _members) and the
# write probe after every object under the prefix was deleted, and delete reports them.
@pytest.mark.parametrize("any_store", [k for k in STORE_KINDS if k != "s3"], indirect=True)
def test_delete_removes_the_group_and_its_leases_on_every_store(
    any_store: tuple[str, dict[str, str]],
) -> None:
    store, options = any_store
    group = _group()
    d = GroupDriver(store, group, {"t": 1}, storage_options=options)
    d.rebalance(["A"])
    d.commit("A", {("t", 0): 3})
    LeaseFiles(d.client.uri, storage_options=options).renew("A", int(time.time() * 1000))
    d.leave("A")
    args = ["--store", store, *(f"--store-option={k}={v}" for k, v in sorted(options.items()))]
    assert run_cli("list", *args, "--json").json()["groups"][0]["group"] == group

    deleted = run_cli("delete", *args, "--group", group, "--yes")
    assert deleted.code == 0, deleted.err
    assert run_cli("list", *args, "--json").json()["groups"] == []
    assert not list_dir(d.client.uri, options)  # nothing left: no table, no _members
