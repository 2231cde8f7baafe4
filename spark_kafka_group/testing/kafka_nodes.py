"""A multi-node Apache Kafka for failure scenarios: three KRaft nodes (one JVM each, broker and
controller combined) on loopback, started from the jars of jvm/pom.xml, replication 3 and
``min.insync.replicas`` 2, as production runs Kafka.

Each node can be killed (SIGKILL), stopped cleanly (SIGTERM: a controlled shutdown that moves
its leaders first), paused (SIGSTOP) and resumed (SIGCONT), and started again on its own data.
:meth:`MultiNodeKafka.leaders` and :meth:`MultiNodeKafka.quorum_leader` say which node leads
what, so a scenario can kill the node that matters. Kafka's own tools (reassignment, leader
election) run against it through :func:`~.kafka_broker.kafka_tool`.

Used by ``tests/integration/test_kafka_failures.py`` and
``test_group_offsets_coordinator_moves.py`` (their ``kafka_nodes`` fixtures) and by
``benchmarks/bench_broker_failover.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType

from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, PartitionMetadata

from spark_kafka_group.testing.kafka_broker import cluster_id, java_command, kafka_tool
from spark_kafka_group.testing.servers import ServerProcess, free_port
from spark_kafka_group.testing.waiting import wait_until

#: Heap per node: three nodes, two Spark queries and the tests share 2 cores and 24 GiB.
NODE_JVM_OPTIONS = ["-Xms128m", "-Xmx384m"]

#: How long the controller waits for a silent broker before fencing it (Kafka's default).
BROKER_SESSION_TIMEOUT_MS = 9000

#: Partitions of ``__consumer_offsets`` (few, so that the first group does not wait for 50).
OFFSETS_TOPIC_PARTITIONS = 4
OFFSETS_TOPIC = "__consumer_offsets"


class KafkaNode:
    """One node (broker and controller) of a :class:`MultiNodeKafka`."""

    def __init__(self, node_id: int, work_dir: Path) -> None:
        self.node_id = node_id
        self.work_dir = work_dir
        self.port = free_port()
        self.controller_port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._server: ServerProcess | None = None
        self._starts = 0

    @property
    def config(self) -> Path:
        return self.work_dir / "server.properties"

    @property
    def pid(self) -> int | None:
        return self._server.process.pid if self._server is not None else None

    @property
    def running(self) -> bool:
        return self._server is not None and self._server.process.poll() is None

    def properties(self, voters: str) -> str:
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.work_dir / "data"),
            "num.partitions": "1",
            "default.replication.factor": "3",
            "min.insync.replicas": "2",
            # Few internal partitions, so that the first group or transaction does not wait
            # for 50 partitions to be created on three slow JVMs.
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": str(OFFSETS_TOPIC_PARTITIONS),
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "3",
            "share.coordinator.state.topic.min.isr": "2",
            "group.initial.rebalance.delay.ms": "0",
            "broker.session.timeout.ms": str(BROKER_SESSION_TIMEOUT_MS),
            # A restarted node takes its leaderships back soon (the preferred replica).
            "leader.imbalance.check.interval.seconds": "10",
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def start(self) -> None:
        """Start (or start again, on its own data) this node's JVM."""
        if self.running:
            raise RuntimeError(f"Kafka node {self.node_id} is already running")
        self._starts += 1
        log = self.work_dir / f"node-{self._starts}.log"
        self._server = ServerProcess(
            f"Apache Kafka node {self.node_id}",
            java_command("kafka.Kafka", [str(self.config)], heap=NODE_JVM_OPTIONS),
            log,
            # As Kafka ships (C2, G1), whatever JVM flags the caller's other JVMs get: the
            # failure scenarios time a controller's failover, which the client compiler slows.
            {k: v for k, v in os.environ.items() if k != "JDK_JAVA_OPTIONS"},
        )

    def kill(self) -> None:
        """SIGKILL: the node dies at once, as when its host is lost."""
        self._signal(signal.SIGKILL)
        self._reap(30)

    def terminate(self, timeout_s: float = 60.0) -> None:
        """SIGTERM: a controlled shutdown (leaders move away first), as an upgrade does."""
        self._signal(signal.SIGTERM)
        self._reap(timeout_s)

    def pause(self) -> None:
        """SIGSTOP: the node stops answering but keeps its connections (a zombie broker)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        if not self.running or self.pid is None:
            raise RuntimeError(f"Kafka node {self.node_id} is not running")
        os.kill(self.pid, sig)

    def _reap(self, timeout_s: float) -> None:
        assert self._server is not None
        try:
            self._server.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._server.process.kill()
            self._server.process.wait(30)
        self._server = None

    def stop(self) -> None:
        if self._server is not None:
            if self._server.process.poll() is None:
                os.kill(self._server.process.pid, signal.SIGCONT)  # a paused node cannot stop
            self._server.stop()
            self._server = None


class MultiNodeKafka:
    """Three (or ``size``) Apache Kafka KRaft nodes on loopback, as a context manager."""

    def __init__(self, size: int = 3, *, work_dir: Path | None = None) -> None:
        self._own_dir = work_dir is None
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="kafka-nodes-"))
        self.nodes = [KafkaNode(n, self.work_dir / f"node{n}") for n in range(1, size + 1)]
        self.bootstrap_servers = ",".join(node.address for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return next(n for n in self.nodes if n.node_id == node_id)

    def start(self) -> MultiNodeKafka:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        cid = cluster_id()
        for node in self.nodes:
            node.work_dir.mkdir(parents=True, exist_ok=True)
            node.config.write_text(node.properties(voters))
            kafka_tool("kafka-storage", "format", "--cluster-id", cid, "--config", str(node.config))
        for node in self.nodes:
            node.start()
        self.wait_ready()
        return self

    def wait_ready(self, timeout_s: float = 90.0, nodes: Iterable[KafkaNode] | None = None) -> None:
        """Wait until every running node (or ``nodes``) is a registered broker and a topic
        can be created and deleted with replication 3 (the controller quorum works)."""
        want = {n.node_id for n in (nodes if nodes is not None else self.nodes) if n.running}
        deadline = time.monotonic() + timeout_s
        last: BaseException | None = None
        while time.monotonic() < deadline:
            admin = self._admin()
            try:
                brokers = set(admin.list_topics(timeout=5).brokers)
                if not want <= brokers:
                    raise RuntimeError(f"brokers {sorted(brokers)} registered, want {want}")
                probe = f"skg-ready-{uuid.uuid4().hex[:8]}"
                replicas = min(3, len(want))
                admin.create_topics([NewTopic(probe, 1, replicas)])[probe].result(timeout=10)
                admin.delete_topics([probe])[probe].result(timeout=10)
                return
            except Exception as exc:
                last = exc
                time.sleep(0.5)
        logs = "\n".join(
            f"--- node {n.node_id}:\n"
            + "".join(p.read_text(errors="replace")[-1500:] for p in n.work_dir.glob("node-*.log"))
            for n in self.nodes
        )
        raise RuntimeError(f"the Kafka nodes did not become ready ({last!r}):\n{logs}")

    def restart(self, node: KafkaNode) -> None:
        """Start a stopped node again on its own data and wait until it is a broker again."""
        node.start()
        self.wait_ready(nodes=[node])

    def create_topic(self, topic: str, partitions: int) -> None:
        admin = self._admin()
        admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(timeout=30)

    def leaders(self, topic: str) -> dict[int, int]:
        """``partition -> leader node id`` (-1 where the partition has no leader now)."""
        meta = self._admin().list_topics(topic, timeout=10).topics[topic]
        return {p: int(info.leader) for p, info in meta.partitions.items()}

    def replicas(self, topic: str) -> dict[int, list[int]]:
        """``partition -> replica node ids``, the preferred leader first."""
        meta = self._admin().list_topics(topic, timeout=10).topics[topic]
        return {p: [int(r) for r in info.replicas] for p, info in meta.partitions.items()}

    def busiest_leader(self, topic: str, *, besides: KafkaNode | None = None) -> KafkaNode:
        """The running node (other than ``besides``) that leads the most partitions of
        ``topic``."""
        counts = Counter(self.leaders(topic).values())
        running = [n for n in self.nodes if n.running and n is not besides]
        return max(running, key=lambda n: (counts.get(n.node_id, 0), -n.node_id))

    def wait_in_sync(self, timeout_s: float = 120.0) -> None:
        """Until every partition of every topic (the internal ones too) has all its replicas
        in sync: a controlled shutdown of the next node then moves its leaders at once."""

        def in_sync() -> bool:
            topics = self._admin().list_topics(timeout=10).topics
            return all(
                len(info.isrs) == len(info.replicas)
                for meta in topics.values()
                for info in meta.partitions.values()
            )

        _wait(in_sync, timeout_s, "every replica in sync")

    def wait_leaders_off(self, node: KafkaNode, timeout_s: float = 60.0) -> None:
        """Until no partition names ``node`` (stopped) as its leader: the controller fenced
        it and elected others."""

        def moved() -> bool:
            topics = self._admin().list_topics(timeout=10).topics
            return all(
                info.leader != node.node_id
                for meta in topics.values()
                for info in meta.partitions.values()
            )

        _wait(moved, timeout_s, f"the leaders of node {node.node_id} moved")

    def _admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})

    def group_coordinator(self, group: str) -> KafkaNode | None:
        """The node coordinating Kafka consumer group ``group`` now: the leader of its
        ``__consumer_offsets`` partition; None while that partition has no leader (or before
        the topic exists)."""
        info = self._offsets_partition(group)
        if info is None or info.leader < 0:
            return None
        return self.node(int(info.leader))

    def move_group_coordinator(self, group: str) -> KafkaNode:
        """Move Kafka consumer group ``group``'s coordinator to another running node while
        every node stays up, as a preferred leader election does (after a node's restart, or
        a reassignment): Kafka's kafka-reassign-partitions puts another in-sync replica of
        the group's ``__consumer_offsets`` partition first, then that replica is elected.
        Returns the new coordinator."""
        info = self._offsets_partition(group)
        if info is None or info.leader < 0:
            raise RuntimeError(f"Kafka group {group!r} has no coordinator to move")
        targets = [
            r for r in info.replicas if r != info.leader and r in info.isrs and self.node(r).running
        ]
        if not targets:
            raise RuntimeError(
                f"no other in-sync replica to move Kafka group {group!r}'s coordinator to: "
                f"replicas {info.replicas}, in sync {info.isrs}"
            )
        order = [targets[0], *(r for r in info.replicas if r != targets[0])]
        offsets = KafkaTopicPartition(OFFSETS_TOPIC, self.offsets_partition(group))
        plan = {
            "version": 1,
            "partitions": [
                {"topic": offsets.topic, "partition": offsets.partition, "replicas": order}
            ],
        }
        plan_file = self.work_dir / f"reassign-{uuid.uuid4().hex[:8]}.json"
        plan_file.write_text(json.dumps(plan))
        kafka_tool("kafka-reassign-partitions", "--bootstrap-server", self.bootstrap_servers,
                   "--reassignment-json-file", str(plan_file), "--execute")  # fmt: skip

        def elected() -> bool:
            now = self._offsets_partition(group)
            if now is not None and list(now.replicas) == order and now.leader != order[0]:
                admin = self._admin()  # held: a client dropped ends its requests (_DESTROY)
                admin.elect_leaders(ElectionType.PREFERRED, [offsets]).result(30)
            return self.group_coordinator(group) is self.node(order[0])

        _wait(elected, 60, f"Kafka group {group!r}'s coordinator moved to node {order[0]}")
        return self.node(order[0])

    @staticmethod
    def offsets_partition(group: str) -> int:
        """The partition of ``__consumer_offsets`` that holds Kafka group ``group`` (its
        leader is the group's coordinator): Kafka picks it from the group id's Java hash
        code."""
        code = 0
        for unit in group.encode("utf-16-be").hex(" ", 2).split():  # Java's String.hashCode
            code = (31 * code + int(unit, 16)) & 0xFFFFFFFF
        signed = code - (1 << 32) if code >= 1 << 31 else code
        return (0 if signed == -(1 << 31) else abs(signed)) % OFFSETS_TOPIC_PARTITIONS

    def _offsets_partition(self, group: str) -> PartitionMetadata | None:
        """The metadata of ``group``'s partition of ``__consumer_offsets`` (None before the
        topic exists)."""
        topic = self._admin().list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC]
        if topic.error is not None:
            return None
        return topic.partitions.get(self.offsets_partition(group))

    def quorum_leader(self) -> KafkaNode:
        """The active controller (the KRaft quorum's leader), from kafka-metadata-quorum."""
        out = kafka_tool(
            "kafka-metadata-quorum",
            "--bootstrap-server",
            self.bootstrap_servers,
            "describe",
            "--status",
        ).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "LeaderId":
                return self.node(int(value.strip()))
        raise RuntimeError(f"kafka-metadata-quorum named no leader:\n{out}")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> MultiNodeKafka:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """:func:`wait_until` that takes a failing look (a node still starting) as not yet."""

    def holds() -> bool:
        try:
            return predicate()
        except Exception:
            return False

    wait_until(holds, timeout_s, what, poll_s=0.5)
