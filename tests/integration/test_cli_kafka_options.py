"""``kafka-group`` with ``kafka-consumer-groups``'s options, names and output columns, on real
group logs and the real broker (fixture ``bootstrap_servers``). Each test builds its groups
once and checks several options on them (the suite's time is shared)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from spark_kafka_group.ops.admin import describe_group
from spark_kafka_group.quickstart.sample_data import create_topic
from tests.integration.cli_support import GroupDriver, run_cli

OFFSETS_HEADER = [
    "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
    "CONSUMER-ID", "HOST", "CLIENT-ID",
]  # fmt: skip


def _group(prefix: str = "g") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _produce_at(servers: str, topic: str, partitions: int, times_ms: list[int]) -> None:
    """One record per timestamp in ``times_ms`` to each partition (CreateTime as given)."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    for i, ts in enumerate(times_ms):
        for p in range(partitions):
            producer.produce(topic, value=f"v{i}".encode(), partition=p, timestamp=ts)
    assert producer.flush(30) == 0


def _table(out: str) -> tuple[list[str], list[list[str]]]:
    """Kafka's table: a blank line, the header, the rows (split on spaces)."""
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[0].split(), [line.split() for line in lines[1:]]


@pytest.mark.broker
def test_describe_views_list_state_and_the_cluster_from_the_environment(
    bootstrap_servers: str, topic_name: str, group_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    now = int(time.time() * 1000)
    _produce_at(bootstrap_servers, topic_name, 2, [now] * 10)
    stable, empty = _group("stable"), _group("empty")
    d = GroupDriver(group_store, stable, {topic_name: 2})
    d.rebalance(["A"])
    d.commit("A", {(topic_name, 0): 4, (topic_name, 1): 6})
    e = GroupDriver(group_store, empty, {topic_name: 2})
    e.rebalance(["B"])
    e.commit("B", {(topic_name, 0): 10})
    e.leave("B")
    store = ["--store", group_store]

    # Every Kafka-facing command reads $KAFKA_BOOTSTRAP_SERVERS: lag without the option.
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", bootstrap_servers)
    described = run_cli("describe", *store, "--group", stable)
    assert described.code == 0, described.err
    header, rows = _table(described.out)
    assert header == OFFSETS_HEADER
    assert sorted(rows) == [
        [stable, topic_name, "0", "4", "10", "6", "A", "test-host", "-"],
        [stable, topic_name, "1", "6", "10", "4", "A", "test-host", "-"],
    ]
    # --offsets is the default view; --bootstrap-server and the old spelling say the same.
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS")
    for flag in ("--bootstrap-server", "--bootstrap-servers"):
        same = run_cli("describe", *store, "--group", stable, "--offsets", flag, bootstrap_servers)
        assert same.code == 0 and _table(same.out)[1] == rows, same.err
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", bootstrap_servers)
    plan = run_cli("reset-offsets", *store, "--group", empty, "--all-topics", "--to-latest")
    assert plan.code == 0, plan.err  # reset-offsets too finds the cluster in the environment

    # --all-groups: both groups' rows; an Empty group is said so on stderr, as Kafka does.
    both = run_cli("describe", *store, "--all-groups")
    assert both.code == 0, both.err
    groups = [r[0] for line in both.out.split("\n\n") if line.strip() for r in _table(line)[1]]
    assert sorted(set(groups)) == sorted([stable, empty])
    assert f"Consumer group '{empty}' has no active members." in both.err
    assert [empty, topic_name, "0", "10", "10", "0", "-", "-", "-"] in [
        r for chunk in both.out.split("\n\n") if chunk.strip() for r in _table(chunk)[1]
    ]

    members = run_cli("describe", *store, "--group", stable, "--members")
    assert _table(members.out) == (
        ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
        [[stable, "A", "test-host", "2"]],  # an empty CLIENT-ID prints as nothing
    )
    verbose = run_cli("describe", *store, "--group", stable, "--members", "--verbose")
    header, [row] = _table(verbose.out)
    assert header[-1] == "ASSIGNMENT" and row[-1] == f"{topic_name}(0,1)"
    state = run_cli("describe", *store, "--group", stable, "--state")
    lines = [line for line in state.out.splitlines() if line.strip()]
    assert lines[0].split() == [
        "GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS",
    ]  # fmt: skip
    assert lines[1].split()[0] == stable and lines[1].split()[-3:] == ["range", "Stable", "1"]
    assert run_cli("describe", *store, "--group", stable, "--state", "--members").code == 2
    assert run_cli("describe", *store, "--group", stable, "--verbose").code == 2

    # list: names (Kafka's --list); --state adds the column and filters on given states.
    assert sorted(run_cli("list", *store).out.split()) == sorted([stable, empty])
    header, rows = _table(run_cli("list", *store, "--state").out)
    assert header == ["GROUP", "STATE"]
    assert sorted(rows) == sorted([[stable, "Stable"], [empty, "Empty"]])
    assert _table(run_cli("list", *store, "--state", "empty").out)[1] == [[empty, "Empty"]]
    assert _table(run_cli("list", *store, "--state", "Stable,Dead").out)[1] == [[stable, "Stable"]]
    bad = run_cli("list", *store, "--state", "Running")
    assert bad.code == 2 and "Stable" in bad.err

    # --timeout bounds each request: an unreachable cluster fails in about that time.
    started = time.monotonic()
    down = run_cli(
        "describe", *store, "--group", stable, "--bootstrap-server", "127.0.0.1:1",
        "--timeout", "1000",
    )  # fmt: skip
    assert down.code == 1 and "127.0.0.1:1" in down.err
    # the default takes about 11 s here: 3 attempts 1 s apart, each cut to 3 s when no server
    # has ever answered (60 s otherwise)
    assert time.monotonic() - started < 5

    # The exporter has no --json (it serves /metrics); one without a cluster says how to fix.
    assert run_cli("exporter", *store, "--json").code == 2
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS")
    missing = run_cli("exporter", *store)
    assert missing.code == 2 and "KAFKA_BOOTSTRAP_SERVERS" in missing.err


@pytest.mark.broker
def test_reset_scenarios_export_and_from_file(
    bootstrap_servers: str, topic_name: str, group_store: str, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 3)
    now = int(time.time() * 1000)
    # 5 records two hours old, then 5 of now, on each partition: offsets 0-4 and 5-9.
    _produce_at(bootstrap_servers, topic_name, 3, [now - 7_200_000] * 5 + [now] * 5)
    first, second = _group("first"), _group("second")
    for group, offsets in ((first, {0: 4, 1: 6}), (second, {0: 1})):
        d = GroupDriver(group_store, group, {topic_name: 3})
        d.rebalance(["A"])
        d.commit("A", {(topic_name, p): o for p, o in offsets.items()})
        d.leave("A")
    base = ["--store", group_store, "--bootstrap-server", bootstrap_servers]
    one = [*base, "--group", first]

    def plan(*args: str) -> dict[int, int]:
        result = run_cli("reset-offsets", *args, "--json")
        assert result.code == 0, result.err
        return {p["partition"]: p["new"] for p in result.json()["partitions"]}

    # Kafka's table, and nothing changed without --execute.
    text = run_cli("reset-offsets", *one, "--topic", topic_name, "--to-earliest")
    header, rows = _table(text.out)
    assert header == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert sorted(rows) == [[first, topic_name, str(p), "0"] for p in range(3)]
    assert "--execute" in text.err
    dry = run_cli("reset-offsets", *one, "--topic", topic_name, "--to-earliest", "--dry-run")
    assert dry.code == 0 and describe_group(group_store, first).committed == {
        (topic_name, 0): 4,
        (topic_name, 1): 6,
    }
    both = run_cli("reset-offsets", *one, "--topic", topic_name, "--to-earliest", "--dry-run",
                   "--execute")  # fmt: skip
    assert both.code == 2

    # --to-current: the committed offset, the log end where there is none (partition 2).
    assert plan(*one, "--topic", topic_name, "--to-current") == {0: 4, 1: 6, 2: 10}
    # --by-duration: the first record at or after now minus one hour.
    assert plan(*one, "--topic", topic_name, "--by-duration", "PT1H") == {0: 5, 1: 5, 2: 5}
    assert plan(*one, "--topic", topic_name, "--by-duration", "P1DT1M") == {0: 0, 1: 0, 2: 0}
    bad = run_cli("reset-offsets", *one, "--topic", topic_name, "--by-duration", "1h")
    assert bad.code == 2 and "PT30M" in bad.err
    # --all-topics: the partitions the group has committed offsets for.
    assert plan(*one, "--all-topics", "--to-latest") == {0: 10, 1: 10}
    assert run_cli("reset-offsets", *one, "--to-latest").code == 2  # --topic or --all-topics

    # --export prints Kafka's CSV plan; --from-file reads it back (edited) and applies it.
    exported = run_cli("reset-offsets", *one, "--all-topics", "--shift-by", "-2", "--export")
    assert exported.code == 0, exported.err
    assert exported.out == f"{topic_name},0,2\n{topic_name},1,4\n"
    csv = tmp_path / "plan.csv"
    csv.write_text(exported.out.replace(f"{topic_name},1,4", f"{topic_name},1,7"))
    applied = run_cli("reset-offsets", *one, "--from-file", str(csv), "--execute")
    assert applied.code == 0, applied.err
    assert describe_group(group_store, first).committed == {
        (topic_name, 0): 2,
        (topic_name, 1): 7,
    }
    # --all-groups: one plan for every group; the CSV names each row's group.
    every = run_cli("reset-offsets", *base, "--all-groups", "--all-topics", "--to-earliest",
                    "--export")  # fmt: skip
    assert every.code == 0, every.err
    assert sorted(every.out.splitlines()) == sorted(
        [f"{first},{topic_name},0,0", f"{first},{topic_name},1,0", f"{second},{topic_name},0,0"]
    )
    csv.write_text(every.out)
    run_cli("reset-offsets", *base, "--all-groups", "--from-file", str(csv), "--execute")
    assert describe_group(group_store, second).committed == {(topic_name, 0): 0}
    assert describe_group(group_store, first).committed == {
        (topic_name, 0): 0,
        (topic_name, 1): 0,
    }


@pytest.mark.spark
@pytest.mark.broker
def test_describe_prints_what_kafka_consumer_groups_prints_of_the_mirrored_group(
    spark, bootstrap_servers: str, topic_name: str, group_store: str, tmp_path: Path
) -> None:
    """A query commits with commitToKafka=true; then kafka-group describe of its group and
    Kafka's own kafka-consumer-groups --describe of the Kafka group it mirrors to print the
    same table: columns, offsets, log end offsets, lag (the query stopped: no owners)."""
    from spark_kafka_group.kafka.cluster import KafkaCluster
    from spark_kafka_group.kafka.consumer_group_offsets import kafka_group_offsets
    from spark_kafka_group.quickstart.sample_data import produce_sample
    from spark_kafka_group.testing.kafka_broker import kafka_tool
    from spark_kafka_group.testing.waiting import wait_until
    from tests.streaming import run_available_now, source_options

    create_topic(bootstrap_servers, topic_name, 3)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=3, per_partition=20)
    committed = {(topic_name, p): n for p, n in produced.items()}
    group = _group("mirrored")
    options = source_options(
        bootstrap_servers, topic_name, group, group_store, commitToKafka="true"
    )
    run_available_now(spark, options, str(tmp_path / "ckpt"))
    produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=5, start=20)
    # The member writes the run's final commit as its streaming-source process closes it,
    # which the JVM does not wait for: awaitTermination may return before the log has it.
    wait_until(
        lambda: describe_group(group_store, group).committed == committed,
        30,
        "the run's final offsets in the group log",
    )

    def mirrored() -> bool:
        with KafkaCluster(bootstrap_servers) as cluster:
            return kafka_group_offsets(cluster, group) == committed

    wait_until(mirrored, 60, "the group's commits in the Kafka consumer group")
    ours = run_cli("describe", "--group", group, "--store", group_store,
                   "--bootstrap-server", bootstrap_servers)  # fmt: skip
    assert ours.code == 0, ours.err
    theirs = kafka_tool(
        "kafka-consumer-groups", "--bootstrap-server", bootstrap_servers, "--describe",
        "--group", group,
    )  # fmt: skip
    our_header, our_rows = _table(ours.out)
    kafka_header, kafka_rows = _table(theirs.stdout)
    assert our_header == kafka_header == OFFSETS_HEADER
    # Kafka lists a member's partitions in no particular order: compared as sets of rows.
    assert sorted(our_rows) == sorted(kafka_rows)
    lags = {int(r[2]): int(r[5]) for r in our_rows}
    assert lags == {0: 6, 1: 6, 2: 0}  # 5 records + the producer's end-of-batch one
    # Both say on stderr that the group has no active members.
    notice = f"Consumer group '{group}' has no active members."
    assert notice in ours.err and notice in theirs.stderr + theirs.stdout
