"""Kafka as production runs it: a three-node Apache Kafka (KRaft, replication 3, min ISR 2)
whose brokers die, restart and move leaders under a running group.

Every scenario runs two ``format("kafka-group")`` queries of one group (two members, a 1 s
trigger, ``commitToKafka``) on a six-partition topic under steady idempotent acks=all
production; during the fault it also runs ``kafka-group describe --bootstrap-server``,
``export-to-kafka`` and ``import-from-kafka`` as processes, and the hard bounce and the rolling
restart scrape a ``kafka-group exporter`` right after each loss. It then checks:

- both queries are alive, and no process died with a signal;
- the delivery checker (tests/delivery.py): every record of the topic read, none twice (no
  partition moves between the members: the group store never failed), positions contiguous;
- the first record of a partition the lost node led is read within :data:`FIRST_RECORD_S` of
  the loss (a record past what was read of that partition at the loss, by a batch of either
  query whose records were fetched after the loss).

Each prints a one-line summary (run with ``-s`` to see it). The cluster is shared by the
module; every scenario ends with all three nodes up and in sync.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyspark.sql.streaming import StreamingQuery

from spark_kafka_group.fetcher.pool import NO_TOPIC, TOPIC_ID_TTL_S, ConsumerPool
from spark_kafka_group.testing.failover import Loss, first_record_after, highest_read, loss
from spark_kafka_group.testing.group_log import group_records
from spark_kafka_group.testing.kafka_broker import kafka_tool
from spark_kafka_group.testing.kafka_nodes import KafkaNode, MultiNodeKafka
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until
from tests.delivery import DeliveryResult, check_delivery, collected_batches
from tests.prometheus import named, scrape, start_exporter
from tests.streaming import Collected, source_options, start_query, stop_between_batches

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.kafka_nodes]

PARTITIONS = 6
#: The acceptance bound: Kafka fences a silent broker after broker.session.timeout.ms (9 s),
#: elects new leaders at once, and the query's next trigger reads from them.
FIRST_RECORD_S = 15.0
KAFKA_GROUP_CLI = str(Path(sys.executable).with_name("kafka-group"))


@dataclass
class GroupUnderFaults:
    """Two queries of one group reading a topic of the cluster under steady production."""

    kafka: MultiNodeKafka
    spark: object
    tmp_path: Path
    name: str
    bootstrap_servers: str = ""
    collected: dict[str, Collected] = field(default_factory=dict)
    queries: dict[str, StreamingQuery] = field(default_factory=dict)
    losses: list[Loss] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    exporter: subprocess.Popen[str] | None = None
    exporter_url: str = ""

    def __post_init__(self) -> None:
        self.topic = f"faults-{self.name}"
        self.group = f"g-{self.name}"
        self.store = str(self.tmp_path / "groups")
        self.bootstrap_servers = self.bootstrap_servers or self.kafka.bootstrap_servers
        self.kafka.create_topic(self.topic, PARTITIONS)
        self.producer = SteadyProducer(
            self.kafka.bootstrap_servers, self.topic, PARTITIONS, per_round=2, idempotent=True
        ).start()

    def start_queries(self) -> None:
        options = source_options(
            self.bootstrap_servers, self.topic, self.group, self.store, commitToKafka="true"
        )
        for name in ("q1", "q2"):
            self.collected[name] = Collected()
            self.queries[name] = start_query(
                self.spark,  # type: ignore[arg-type]
                options,
                str(self.tmp_path / f"ckpt-{name}"),
                self.collected[name],
                available_now=False,
                processing_time="1 second",
            )
        wait_until(
            lambda: all(c.count() > 0 for c in self.collected.values()) or self._failed(),
            120,
            "both queries reading",
        )
        self.assert_alive()

    def _failed(self) -> bool:
        return any(not q.isActive for q in self.queries.values())

    def assert_alive(self) -> None:
        dead = {n: str(q.exception())[:2000] for n, q in self.queries.items() if not q.isActive}
        assert not dead, f"queries ended: {dead}"

    def last_read(self) -> dict[int, int]:
        return highest_read(self._all_records())

    def losing(self, node: KafkaNode, label: str) -> None:
        """Note that ``node`` is about to be lost: what it leads now, read how far."""
        led = [p for p, leader in self.kafka.leaders(self.topic).items() if leader == node.node_id]
        self.losses.append(loss(label, time.time(), led, self._all_records()))

    def wait_recovered(self, timeout_s: float = 90) -> None:
        """Until a record of every partition the last lost node led, produced after the loss,
        is read (or a query ends)."""
        loss = self.losses[-1]

        def recovered() -> bool:
            read = self.last_read()
            return self._failed() or all(read.get(p, -1) > o for p, o in loss.partitions.items())

        wait_until(recovered, timeout_s, f"the partitions of {loss.label} read again")
        self.assert_alive()

    def start_exporter(self) -> None:
        """``kafka-group exporter`` for the group, as its own process (no scrape cache)."""
        self.exporter, self.exporter_url = start_exporter(
            [KAFKA_GROUP_CLI, "exporter", "--store", self.store, "--group", self.group,
             "--bootstrap-server", self.bootstrap_servers, "--port", "0", "--addr", "127.0.0.1",
             "--cache-seconds", "0"],
        )  # fmt: skip

    def scrape(self, when: str) -> None:
        """One scrape of the exporter: answered, the store read, and what the broker side and
        the group's lag showed (noted in the summary)."""
        started = time.monotonic()
        samples = scrape(self.exporter_url)
        took = time.monotonic() - started
        success = {
            dict(labels)["source"]: value
            for labels, value in named(samples, "spark_kafka_group_scrape_success").items()
        }
        lag = list(named(samples, "kafka_consumergroup_lag_sum").values())
        assert success.get("store") == 1.0, (when, success)
        self.tools.append(
            f"exporter({when}) {took:.1f}s broker_ok={success.get('broker', 0):.0f} "
            f"lag={','.join(f'{v:.0f}' for v in lag) or '-'}"
        )

    def run_tools(self) -> None:
        """kafka-group describe / export-to-kafka / import-from-kafka against the cluster, as
        separate processes: each must exit 0, none may die with a signal."""
        base = ["--store", self.store, "--bootstrap-server", self.bootstrap_servers]
        commands = {
            "describe": ["describe", "--group", self.group, *base],
            "export-to-kafka": [
                "export-to-kafka", "--group", self.group,
                "--kafka-group", f"{self.group}-copy", *base,
            ],
            "import-from-kafka": [
                "import-from-kafka", "--group", f"{self.group}-imported",
                "--kafka-group", f"{self.group}-copy", *base,
            ],
        }  # fmt: skip
        for name, args in commands.items():
            started = time.monotonic()
            done = subprocess.run(
                [KAFKA_GROUP_CLI, *args],
                capture_output=True,
                text=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )
            assert done.returncode == 0, (
                f"kafka-group {name} exited with {done.returncode} "
                f"({'a signal' if done.returncode < 0 else 'an error'}):\n"
                f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
            )
            self.tools.append(f"{name} {time.monotonic() - started:.1f}s")

    def finish(self) -> DeliveryResult:
        """Stop producing, read everything, stop the queries, check; print the summary."""
        produced = self.producer.stop()
        total = sum(produced.values())
        wait_until(
            lambda: len(set(self._all_records())) >= total or self._failed(),
            120,
            "every record of the topic read",
        )
        self.assert_alive()
        commits_to_kafka = self._kafka_group_committed()
        for query in self.queries.values():
            stop_between_batches(query)
        batches = [b for name, c in self.collected.items() for b in collected_batches(name, c, 0)]
        result = check_delivery(
            produced,
            batches,
            group_records(self.store, self.group),
            topic=self.topic,
            print_summary=False,
        )
        firsts = [self._first_record_s(loss) for loss in self.losses]
        shown = " ".join(
            f"{loss.label}={first:.1f}s" if first is not None else f"{loss.label}=none"
            for loss, first in zip(self.losses, firsts, strict=True)
        )
        print(
            f"\n{self.name}: queries alive=2/2 {result.summary()} first_record_after_loss: "
            f"{shown} tools: {', '.join(self.tools)} kafka_group_committed={commits_to_kafka} "
            f"log_extra={self.producer.log_extra} failed_deliveries={self.producer.failed}"
        )
        result.assert_ok()
        assert result.duplicated == 0, result.details()
        late = [(loss.label, first) for loss, first in zip(self.losses, firsts, strict=True)
                if first is None or first > FIRST_RECORD_S]  # fmt: skip
        assert not late, f"first record after a loss later than {FIRST_RECORD_S}s: {late}"
        return result

    def _all_records(self) -> list[tuple[int, int]]:
        return [r for c in self.collected.values() for r in c.records]

    def _first_record_s(self, loss: Loss) -> float | None:
        """Seconds from the loss to the first batch of either query that read a record of a
        partition the lost node led, past what had been read of it before the loss, among the
        batches whose records were fetched after the loss (their sink began after it)."""
        batches = [
            (t, [(p, o) for p, o, _ in c.batches[b]])
            for c in self.collected.values()
            for b, t in list(c.times.items())
            if c.began[b] > loss.at
        ]
        return first_record_after(loss, batches)

    def _kafka_group_committed(self) -> int:
        """Partitions of the topic with an offset in the Kafka group (commitToKafka), as
        Kafka's own kafka-consumer-groups shows them."""
        out = kafka_tool(
            "kafka-consumer-groups", "--bootstrap-server", self.kafka.bootstrap_servers,
            "--describe", "--group", self.group,
        ).stdout  # fmt: skip
        rows = [line.split() for line in out.splitlines() if self.topic in line.split()]
        return sum(1 for row in rows if len(row) > 3 and row[3].isdigit())

    def close(self) -> None:
        self.producer.stop()
        if self.exporter is not None:
            self.exporter.terminate()
            self.exporter.wait(30)
        for query in self.queries.values():
            if query.isActive:
                query.stop()


@pytest.fixture
def scenario(
    request: pytest.FixtureRequest, kafka_nodes: MultiNodeKafka, spark, tmp_path: Path
) -> Iterator[GroupUnderFaults]:
    name = request.node.name.removeprefix("test_").replace("_", "-")[:40]
    group = GroupUnderFaults(kafka_nodes, spark, tmp_path, name)
    try:
        yield group
    finally:
        group.close()  # then kafka_nodes restarts what the test stopped


def test_hard_bounce(scenario: GroupUnderFaults) -> None:
    """SIGKILL the node leading the most partitions, restart it; then the same on another."""
    kafka = scenario.kafka
    scenario.start_queries()
    scenario.start_exporter()
    first_victim = None
    for round_ in (1, 2):
        victim = kafka.busiest_leader(scenario.topic, besides=first_victim)
        scenario.losing(victim, f"kill{round_}(node{victim.node_id})")
        victim.kill()
        scenario.scrape(f"kill{round_}")
        scenario.wait_recovered()
        if round_ == 1:
            scenario.run_tools()
        kafka.restart(victim)
        kafka.wait_in_sync()
        scenario.scrape(f"restarted{round_}")
        first_victim = victim
    scenario.finish()


def test_rolling_restart(scenario: GroupUnderFaults) -> None:
    """Every node in turn stopped cleanly (controlled shutdown) and started again."""
    kafka = scenario.kafka
    scenario.start_queries()
    scenario.start_exporter()
    for node in kafka.nodes:
        scenario.losing(node, f"stop(node{node.node_id})")
        node.terminate()
        scenario.scrape(f"stop{node.node_id}")
        scenario.wait_recovered()
        if node.node_id == 1:
            scenario.run_tools()
        kafka.restart(node)
        kafka.wait_in_sync()
    scenario.finish()


def test_quorum_leader_killed(scenario: GroupUnderFaults) -> None:
    """SIGKILL the active controller (the KRaft quorum's leader), restart it."""
    kafka = scenario.kafka
    scenario.start_queries()
    victim = kafka.quorum_leader()
    scenario.losing(victim, f"kill-controller(node{victim.node_id})")
    victim.kill()
    scenario.wait_recovered()
    scenario.run_tools()
    kafka.restart(victim)
    kafka.wait_in_sync()
    scenario.finish()


def test_zombie_broker_paused_past_its_session(scenario: GroupUnderFaults) -> None:
    """SIGSTOP the busiest leader past broker.session.timeout.ms (the controller fences it and
    moves its leaders), then SIGCONT: it comes back as a follower and catches up."""
    kafka = scenario.kafka
    scenario.start_queries()
    victim = kafka.busiest_leader(scenario.topic)
    scenario.losing(victim, f"pause(node{victim.node_id})")
    victim.pause()
    try:
        scenario.wait_recovered()
        scenario.run_tools()
    finally:
        victim.resume()
    kafka.wait_in_sync()
    scenario.finish()


def test_reassignment_and_preferred_leader_election(scenario: GroupUnderFaults) -> None:
    """Kafka's kafka-reassign-partitions reverses every partition's replica order (so the
    preferred leader changes), then kafka-leader-election moves the leaders to it. Kafka may
    move a leader when the reassignment completes already; each step's moves are a loss."""
    kafka = scenario.kafka
    scenario.start_queries()
    servers = kafka.bootstrap_servers
    replicas = kafka.replicas(scenario.topic)
    plan = {
        "version": 1,
        "partitions": [
            {"topic": scenario.topic, "partition": p, "replicas": list(reversed(r))}
            for p, r in sorted(replicas.items())
        ],
    }
    plan_file = scenario.tmp_path / "reassign.json"
    plan_file.write_text(json.dumps(plan))
    steps = {
        "reassignment": lambda: _reassign(servers, plan_file),
        "election": lambda: kafka_tool(
            "kafka-leader-election", "--bootstrap-server", servers,
            "--election-type", "PREFERRED", "--all-topic-partitions",
        ),
    }  # fmt: skip
    for label, step in steps.items():
        before = kafka.leaders(scenario.topic)
        read = scenario._all_records()
        at = time.time()
        step()
        after = kafka.leaders(scenario.topic)
        moved = [p for p in before if after[p] != before[p]]
        if moved:
            scenario.losses.append(loss(label, at, moved, read))
            scenario.wait_recovered()
    assert kafka.leaders(scenario.topic) == {p: r[-1] for p, r in replicas.items()}
    assert scenario.losses, "no leader moved"
    scenario.run_tools()
    scenario.finish()


def _reassign(servers: str, plan_file: Path) -> None:
    kafka_tool("kafka-reassign-partitions", "--bootstrap-server", servers,
               "--reassignment-json-file", str(plan_file), "--execute")  # fmt: skip
    wait_until(
        lambda: "is completed" in kafka_tool(
            "kafka-reassign-partitions", "--bootstrap-server", servers,
            "--reassignment-json-file", str(plan_file), "--verify",
        ).stdout,
        90, "the reassignment completed",
    )  # fmt: skip


def test_a_dead_node_first_in_the_bootstrap_servers(
    kafka_nodes: MultiNodeKafka, spark, tmp_path: Path
) -> None:
    """The first node of kafka.bootstrap.servers is down when the queries start (and for the
    tools): another answers, and nothing waits for the dead one."""
    dead = kafka_nodes.nodes[0]
    dead.kill()
    try:
        kafka_nodes.wait_leaders_off(dead)
        scenario = GroupUnderFaults(
            kafka_nodes, spark, tmp_path, "dead-bootstrap-node",
            bootstrap_servers=kafka_nodes.bootstrap_servers,
        )  # fmt: skip
        assert scenario.bootstrap_servers.split(",")[0] == dead.address
        try:
            started = time.monotonic()
            scenario.start_queries()
            print(f"\nboth queries read {time.monotonic() - started:.1f}s after their start")
            scenario.run_tools()
            kafka_nodes.restart(dead)
            kafka_nodes.wait_in_sync()
            scenario.finish()
        finally:
            scenario.close()
    finally:
        if not dead.running:
            kafka_nodes.restart(dead)
        kafka_nodes.wait_in_sync()


def test_the_fetch_consumer_pool_finds_a_topic_id_while_a_node_is_dead(
    kafka_nodes: MultiNodeKafka,
) -> None:
    """Each fetch asks its topic's id (DescribeTopics, which librdkafka sends to the node its
    metadata names as the controller). With that node dead, the answer must still come from
    a live node, not after the request's timeout with no id."""
    topic = "faults-topic-id"
    kafka_nodes.create_topic(topic, PARTITIONS)
    pool = ConsumerPool()
    key = (kafka_nodes.bootstrap_servers, ())
    known = pool.topic_id(key, topic)
    assert known not in (None, NO_TOPIC)
    victim = kafka_nodes.nodes[0]
    victim.kill()
    try:
        answers = []
        for _ in range(6):
            time.sleep(TOPIC_ID_TTL_S)  # past the cache: every call asks the cluster
            started = time.monotonic()
            answers.append((pool.topic_id(key, topic), round(time.monotonic() - started, 1)))
        print(f"\ntopic id with node {victim.node_id} dead (id, seconds): {answers}")
        assert all(answer == known for answer, _ in answers), answers
    finally:
        pool.clear()
        kafka_nodes.restart(victim)
        kafka_nodes.wait_in_sync()
