"""Kafka's failures under the product's Kafka clients.

* A Kafka consumer group's coordinator moves (between live nodes by preferred leader
  elections, then its node stopped cleanly, then killed) while its offsets are committed and
  read in a loop, on the three-node Apache Kafka
  (:class:`~spark_kafka_group.testing.kafka_nodes.MultiNodeKafka`): no crash, every read
  right. A read right after a move must still return the last acknowledged commit: a
  coordinator that has just taken over can know a lower high watermark than its
  predecessor, and without RequireStable it answered with the offsets before that commit
  when a move fell between the commit and the read (KafkaCluster.group_consumer).
* librdkafka's AdminClient crash on an OffsetFetch answered NOT_COORDINATOR, which is why
  reads go through a Consumer handle (spark_kafka_group/kafka/consumer_group_offsets.py): the
  test fails once the installed librdkafka no longer crashes, to say the AdminClient path can
  come back. The answer comes from librdkafka's own mock cluster (tests/librdkafka_mock.py),
  which gives it every time; on a real cluster it depends on the moment a coordinator moves.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from spark_kafka_group.testing.kafka_nodes import KafkaNode, MultiNodeKafka
from spark_kafka_group.testing.waiting import wait_until
from tests.processes import REPO

PARTITIONS = 6
#: Moves of the coordinator between live nodes (preferred leader elections), each followed
#: by rounds of the loop: a move lands between a commit and its reads now and then.
ELECTIONS = 10


def _run_module(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_librdkafka_admin_client_still_crashes_on_an_offset_fetch_answered_not_coordinator() -> (
    None
):
    result = _run_module("tests.librdkafka_mock", "admin-read")
    if result.returncode >= 0:
        pytest.fail(
            "librdkafka's AdminClient no longer crashes when an OffsetFetch "
            f"(list_consumer_group_offsets) is answered NOT_COORDINATOR (exit code "
            f"{result.returncode}, output: {result.stdout.strip()!r}). kafka_group_offsets can "
            "go back to the AdminClient's list_consumer_group_offsets "
            "(spark_kafka_group/kafka/consumer_group_offsets.py); then drop this test and "
            "tests/librdkafka_mock.py's admin-read."
        )
    assert -result.returncode == signal.SIGSEGV, result.stderr[-2000:]


def test_reads_and_commits_survive_the_answer_that_crashes_the_admin_client() -> None:
    result = _run_module("tests.librdkafka_mock", "product-read")
    assert result.returncode == 0, f"exit code {result.returncode}:\n{result.stderr[-3000:]}"
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["committed"] == {"orders-0": 5, "orders-1": 6}
    assert answer["read_all"] == {"orders-0": 5, "orders-1": 6}
    assert answer["read_one"] == {"orders-1": 6}
    # Each request was answered NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and
    # COORDINATOR_LOAD_IN_PROGRESS before it got through.
    assert answer["offset_commits"] >= 4 and answer["offset_fetches"] >= 8


class _OffsetsLoop:
    """``tests/group_offsets_loop.py`` in a subprocess; its JSON lines in a file."""

    def __init__(self, workdir: Path, servers: str, group: str, topic: str) -> None:
        self.stop_file = workdir / "stop"
        self.out = workdir / "rounds.jsonl"
        self.err = workdir / "loop.log"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.group_offsets_loop", servers, group, topic,
                 str(PARTITIONS), str(self.stop_file)],
                cwd=REPO, stdout=out, stderr=err, text=True,
            )  # fmt: skip

    def rounds(self) -> list[dict[str, Any]]:
        lines = self.out.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def rounds_since(self, moment: float) -> int:
        """Rounds started after ``moment`` (this machine's monotonic clock) that ended right."""
        return sum(1 for r in self.rounds() if r["started"] > moment and r.get("correct"))

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> int:
        self.stop_file.touch()
        try:
            return self.process.wait(180)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)
            raise AssertionError("the offsets loop did not stop within 180s") from None


def _coordinator(kafka: MultiNodeKafka, group: str) -> KafkaNode:
    found: list[KafkaNode] = []

    def known() -> bool:
        node = kafka.group_coordinator(group)
        found[:] = [node] if node is not None and node.running else []
        return bool(found)

    wait_until(known, 60, f"a running coordinator of Kafka group {group!r}")
    return found[0]


@pytest.mark.broker
@pytest.mark.kafka_nodes
def test_group_offsets_are_read_and_committed_while_the_coordinator_moves(
    kafka_nodes: MultiNodeKafka, tmp_path: Path
) -> None:
    kafka = kafka_nodes
    topic = f"t-{uuid.uuid4().hex[:10]}"
    group = f"legacy-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, PARTITIONS)
    loop = _OffsetsLoop(tmp_path, kafka.bootstrap_servers, group, topic)
    moves: list[str] = []
    try:
        started = time.monotonic()
        wait_until(lambda: loop.rounds_since(started) >= 3, 120, "three rounds of the loop")
        for _ in range(ELECTIONS):
            old = _coordinator(kafka, group)
            moved_at = time.monotonic()
            new = kafka.move_group_coordinator(group)
            wait_until(
                lambda moment=moved_at: loop.rounds_since(moment) >= 3 or not loop.alive(),
                60,
                "three rounds of the loop after a preferred leader election",
            )
            moves.append(f"elect {old.node_id} -> {new.node_id}")
        for how in ("terminate", "kill"):
            node = _coordinator(kafka, group)
            moved_at = time.monotonic()
            if how == "terminate":
                node.terminate()  # a controlled shutdown: the old coordinator says NOT_COORDINATOR
            else:
                node.kill()
            new = _coordinator(kafka, group)
            assert new is not node, f"the coordinator of {group!r} stayed on node {node.node_id}"
            wait_until(
                lambda moment=moved_at: loop.rounds_since(moment) >= 3 or not loop.alive(),
                180,
                f"three rounds of the loop after the coordinator's node was {how}d",
            )
            moves.append(f"{how} node {node.node_id} -> node {new.node_id}")
            kafka.restart(node)
    finally:
        code = loop.stop()
    rounds = loop.rounds()
    failed = [r for r in rounds if not r.get("correct")]
    slowest = max(r["seconds"] for r in rounds)
    print(
        f"group offsets while the coordinator moved ({'; '.join(moves)}): {len(rounds)} rounds, "
        f"{len(failed)} failed, slowest {slowest}s, exit code {code}"
    )
    assert code == 0, f"the loop died (exit code {code}):\n{loop.err.read_text()[-3000:]}"
    assert not failed, failed[:5]
    assert len(moves) == ELECTIONS + 2
